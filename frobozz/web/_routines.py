"""Where the web view reads routines: the routines' store in Postgres (routines live only there), each routine
with its trigger, its next firing and its last firings. Only reads."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio

from frobozz.memory import DATABASE_ERRORS, MemoryStoreError
from frobozz.routines import RoutineError, RoutineStore, next_due

from .settings import WebSettings

log = logging.getLogger("frobozz.web")
LAST = 5  # firings shown per routine
_RETRY_SECONDS = 5.0  # after the database could not be reached, the page says so this long before trying again


@dataclass(frozen=True)
class RoutineRow:
    name: str
    trigger: str
    state: str  # active, paused, or what went wrong at the last look
    next: str  # the next firing, as words
    counts: dict[str, int]
    firings: list[dict[str, Any]]  # the newest first


class Routines:
    """The routines' store, opened at the first look (routines live only in the database)."""

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.database_error: str | None = None
        self._store: RoutineStore | None = None
        self._failed_at = 0.0
        self._lock = anyio.Lock()

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.aclose()
            self._store = None

    async def _open(self) -> RoutineStore | None:
        async with self._lock:
            if self._store is None and time.monotonic() - self._failed_at > _RETRY_SECONDS:
                try:
                    self._store = await RoutineStore.open(self.settings, size=2)
                    self.database_error = None
                except (*DATABASE_ERRORS, MemoryStoreError) as e:
                    self._failed(e, "is not reachable")
            return self._store

    def _failed(self, e: BaseException, how: str) -> None:
        self._store, self._failed_at = None, time.monotonic()
        self.database_error = f"the routines' database {how} ({type(e).__name__}): routines live only there"
        log.warning("web: %s: %s", self.database_error, e)

    async def rows(self) -> list[RoutineRow]:
        """Every routine, by name (none without a database: `database_error` says why)."""
        store = await self._open()
        if store is None:
            return []
        try:
            return [await _row(store, r) for r in await store.routines()]
        except DATABASE_ERRORS as e:
            async with self._lock:
                self._failed(e, "went away")
            await store.aclose()
            return []


async def _row(store: RoutineStore, row: dict[str, Any]) -> RoutineRow:
    spec = row["spec"]
    state = "paused" if row["paused"] else (f"problem: {row['problem']}" if row.get("problem") else "active")
    return RoutineRow(name=row["name"], trigger=spec.describe(), state=state, next=await _next(store, row),
                      counts=row.get("counts") or {}, firings=await store.firings(row["name"], limit=LAST))


async def _next(store: RoutineStore, row: dict[str, Any]) -> str:
    spec = row["spec"]
    if row["paused"]:
        return "none while paused"
    if spec.kind == "inbox":
        return f"on new mail (looks at least every {spec.poll:g} s)"
    if spec.kind == "feed":
        return f"on a new entry (looks every {spec.poll:g} s)"
    try:
        due = await next_due(store, row)
    except RoutineError as e:
        return f"unknown: {e}"
    if due is None:
        return ""
    return "due now" if due <= datetime.now(UTC) else f"{due:%Y-%m-%d %H:%M:%S} UTC"
