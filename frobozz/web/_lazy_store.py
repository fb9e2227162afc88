"""A store the web view opens at the first look. When its database cannot be reached, or goes away under a
query, pages go on without it and say why (`database_error`); it is tried again after `RETRY_SECONDS`, so a
page does not wait on a dead database at every look. A query the database refuses (its data, its syntax) is
that page's error alone: it does not close the store for every page."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

import anyio
import asyncpg
from asyncpg.exceptions import _base as asyncpg_client

from frobozz.memory import DATABASE_ERRORS, DatabaseError, MemoryStoreError

log = logging.getLogger("frobozz.web")
RETRY_SECONDS = 5.0  # after the database could not be reached, pages go on without it this long
# what a database that is away raises under a query: the connection lost, refused or timed out, the server
# shutting down (not, as all of DATABASE_ERRORS, any Postgres error: one query's bad data is not an outage)
AWAY = (OSError, DatabaseError, asyncpg.InterfaceError, asyncpg.InternalClientError)  # (TimeoutError is an OSError)
# and the Postgres errors that say so, by SQLSTATE: a whole class (connection exception, authorization refused, no
# such database), or one state: the server shutting down (admin, crash) or not taking connections yet, too many
# connections, and "database … is not currently accepting connections" (as a new connection to a closed one is
# told). Not the rest of classes 53 and 57: a statement timeout (57014), one query's out of memory, are its alone
AWAY_CLASSES = ("08", "28", "3D")
AWAY_STATES = ("57P01", "57P02", "57P03", "53300", "55000")
# asyncpg's own errors for what the client sent (an argument out of its type's range, a setting that is wrong):
# InterfaceErrors, and yet that query's alone
NOT_AWAY = (asyncpg_client.DataError, asyncpg.ClientConfigurationError)  # (asyncpg.DataError is Postgres's class 22)


def is_away(e: BaseException) -> bool:
    """Whether `e` says the database is away, not that it refused one query."""
    if isinstance(e, asyncpg.PostgresError):
        state = str(getattr(e, "sqlstate", None) or "")
        return state[:2] in AWAY_CLASSES or state in AWAY_STATES
    return isinstance(e, AWAY) and not isinstance(e, NOT_AWAY)


class _Closable(Protocol):
    async def aclose(self) -> None: ...


S = TypeVar("S", bound=_Closable)
T = TypeVar("T")


class LazyStore(Generic[S]):
    """`open()` at the first look; `database_error` reads "{what} {is not reachable|went away} (Error): {without}"."""

    def __init__(self, open: Callable[[], Awaitable[S]], *, what: str, without: str) -> None:
        self._open, self.what, self.without = open, what, without
        self.database_error: str | None = None
        self._store: S | None = None
        self._failed_at = -RETRY_SECONDS
        self._lock = anyio.Lock()

    async def aclose(self) -> None:
        async with self._lock:  # taken out first: a page failing meanwhile finds it gone and leaves it be
            store, self._store = self._store, None
        if store is not None:
            await store.aclose()

    async def get(self) -> S | None:
        """The store, or None while its database cannot be reached (`database_error` says why)."""
        async with self._lock:
            if self._store is None and time.monotonic() - self._failed_at > RETRY_SECONDS:
                try:
                    self._store = await self._open()
                    self.database_error = None
                except (*DATABASE_ERRORS, MemoryStoreError) as e:
                    self._failed(e, "is not reachable")
            return self._store

    async def use(self, work: Callable[[S], Awaitable[T]]) -> T | None:
        """`work(store)`, or None when there is no database right now (it went away: a later look retries); any
        other error, a query the database refused among them, is raised to the page that asked."""
        store = await self.get()
        if store is None:
            return None
        try:
            return await work(store)
        except DATABASE_ERRORS as e:
            if not is_away(e):
                raise
            async with self._lock:
                taken = self._store is store  # by the first page it failed under: that one closes it, once
                if taken:
                    self._failed(e, "went away")
            if taken:
                await store.aclose()
            return None

    def _failed(self, e: BaseException, how: str) -> None:
        self._store, self._failed_at = None, time.monotonic()
        self.database_error = f"{self.what} {how} ({type(e).__name__}): {self.without}"
        log.warning("web: %s: %s", self.database_error, e)
