"""The memory store for a long-running process (a server, the memory loop): opened on first use and
again after a failure, so a database that is down at start or goes away stops nothing: the next
call tries again.

A database that hangs (accepts and never answers) is worse than one that is down: every call waits
out its own bound. Once a caller finds it silent (`quietly` given the service), `going_without` turns memory
off for every user of the service: `store()` says so at once instead of waiting, and `quietly` starts no
work, until a probe (a new connection and `SELECT 1`, bounded) finds it answering again."""

from __future__ import annotations

import logging
import time

import anyio
import asyncpg

from frobozz._pgguard import postmaster_running

from ._database import DATABASE_ERRORS, POOL_CLOSE_TIMEOUT, close_pool, connect, database_url, migrate
from ._embeddings import Embedder, make_embedder
from ._handoffs import HandoffStore
from ._image_store import ImageStore
from ._loop_sessions import LoopSessionStore
from ._store import MemoryStore
from .exceptions import DatabaseError
from .settings import MemorySettings

log = logging.getLogger("frobozz.memory")
PROBE_WAIT = 2.0  # seconds a probe waits for a new connection's answer: a database that answers takes milliseconds
PROBE_EVERY = 5.0  # seconds between probes while memory is off


class MemoryService:
    """`await service.store()` is the store, opened now or before; `aclose()` closes its pool."""

    def __init__(self, settings: MemorySettings, *, share: MemoryService | None = None) -> None:
        self.settings = settings
        self._share = share  # whose pool and embedding model this one uses (see `sharing`)
        self.embedder: Embedder = share.embedder if share is not None else make_embedder(settings)
        self._store: MemoryStore | None = None
        self._pool: asyncpg.Pool | None = None
        self._lock = anyio.Lock()
        self._swept = False
        self._url: str | None = None  # the database's, once connected: what a probe connects to
        self._silent: str | None = None  # why memory is off (the database does not answer); None: on
        self._probed = 0.0  # when the last probe ended (time.monotonic)
        self._probing = anyio.Lock()

    async def store(self, *, check_model: bool = True) -> MemoryStore:
        """The store; `check_model=False` only for re-embedding, which is how a mismatch is mended. While
        memory is off (see the module), a DatabaseError at once, unless a probe due now finds it answering."""
        root = self._root
        if root._silent is not None and not await self.answering_now():
            raise DatabaseError(
                f"memory is off: {root._silent}; nothing was stored or changed: try again once it answers"
            )
        async with self._lock:
            await root._embedded_again()
            if self._store is None and self._share is not None:
                shared = await self._share.store(check_model=check_model)
                self._store = MemoryStore(
                    shared.pool,
                    self.embedder,
                    default_namespace=self.settings.cortex_default_namespace,
                    max_chars=self.settings.cortex_max_content_chars,
                    cosine_floor=self.settings.cortex_cosine_floor,
                    images_dir=self.settings.images_dir,
                )
            if self._store is None:
                self._url = await database_url(self.settings)
                pool = await connect(self._url, self.settings.cortex_pool_size)
                try:
                    await migrate(pool, dim=self.embedder.dim, model=self.embedder.model)
                    store = MemoryStore(
                        pool,
                        self.embedder,
                        default_namespace=self.settings.cortex_default_namespace,
                        max_chars=self.settings.cortex_max_content_chars,
                        cosine_floor=self.settings.cortex_cosine_floor,
                        images_dir=self.settings.images_dir,
                    )
                    try:  # what a crash mid-store left undone (migration 009): derived data, so best effort
                        await store.heal()
                    except (DatabaseError, asyncpg.PostgresError) as e:
                        log.warning("the words in context of memories a crash cut short are not refreshed: %s", e)
                    if check_model:
                        await store.check_model()
                except BaseException:
                    await close_pool(pool)
                    raise
                self._pool, self._store = pool, store
            return self._store

    def sharing(self, settings: MemorySettings) -> MemoryService:
        """A service on this one's pool and embedding model with settings of its own (its default namespace):
        what each of many servers in one process uses. Closing it leaves the pool to this one."""
        return MemoryService(settings, share=self)

    @property
    def _root(self) -> MemoryService:
        """The service that owns the pool, and with it whether memory is on."""
        return self if self._share is None else self._share._root

    @property
    def answering(self) -> bool:
        """False while memory is off: the database was found not answering, and has not answered a probe since."""
        return self._root._silent is None

    async def going_without(self, why: str) -> bool:
        """Told that `why` (a part slower than its bound, a DatabaseError), probe the database: when it does not
        answer either, memory is off for every user of the service (said once) until it does. Whether it is off."""
        root = self._root
        async with root._probing:  # parts failing at once ask one probe, and the line is said once
            if root._silent is None and (failed := await self._probe(PROBE_WAIT)) is not None:
                root._silent = f"the database does not answer ({why}; a new connection: {failed})"
                log.warning("memory is off: %s; it comes back on its own once the database answers", root._silent)
        return root._silent is not None

    async def until_answering(self) -> None:
        """While memory is off, probe every PROBE_EVERY seconds; return once it is back on (by any probe)."""
        root = self._root
        while root._silent is not None:
            await anyio.sleep(PROBE_EVERY)
            if root._silent is not None:
                await self._probe(PROBE_WAIT)

    async def _embedded_again(self) -> None:
        """The embedded Postgres this service works on, started again when it stopped under it (a crash, a kill, a
        stop): as any command would start it, so a long-running process (a server, the plugin's daemon) does not
        fail every call until it is restarted itself. A database named by FROBOZZ_DATABASE_URL is its operator's."""
        if self.settings.database_url is not None or self._url is None:
            return  # (not connected yet: connecting starts it)
        if postmaster_running(self.settings.postgres_dir):  # (a small file read)
            return
        log.warning("memory: the embedded Postgres is not running (stopped or killed): starting it again")
        try:
            self._url = await database_url(self.settings)
        except Exception as e:  # noqa: BLE001 - the call that needs it says the database cannot be reached
            log.warning("memory: the embedded Postgres did not start again: %s: %s", type(e).__name__, e)

    async def _probe(self, within: float) -> str | None:
        """`SELECT 1` on a new connection (the pool's own may be the ones stuck): None when it answers within
        `within` seconds (and memory is back on, if it was off), else why not."""
        root = self._root
        await root._embedded_again()
        failed: str | None = f"no answer within {within:g} s"
        with anyio.move_on_after(within):
            try:
                connection = await asyncpg.connect(root._url or await database_url(root.settings), timeout=within)
                try:
                    await connection.fetchval("SELECT 1")
                    failed = None
                finally:
                    connection.terminate()  # (a polite close is one more round trip)
            except DATABASE_ERRORS as e:
                failed = f"{type(e).__name__}: {next(iter(str(e).splitlines()), '')}"
        root._probed = time.monotonic()
        if failed is None and root._silent is not None:
            root._silent = None
            log.warning("memory is back on: the database answers again")
        return failed

    async def answering_now(self) -> bool:
        """With memory off, whether it is back: a probe if none was made for PROBE_EVERY seconds (one caller at
        a time), else the last one's word. (What brings memory back when no one watches, as `until_answering`
        does: a session opening after the one that turned memory off closed, say, or the next run's turn.)"""
        root = self._root
        async with root._probing:
            if root._silent is not None and time.monotonic() - root._probed >= PROBE_EVERY:
                await self._probe(PROBE_WAIT)
        return root._silent is None

    async def aclose(self) -> None:
        """Close the pool; with memory off, its connections still in use (on a database that does not answer) are
        waited for only as long as a probe would, not the 10 s of a closing pool's patience. Connections in use
        at the close while memory is on ask a probe first: on a database that hangs, no part had found it out
        yet (the last turn's were done), and leaving chat waited out the whole 10 s."""
        if self._pool is None:
            return
        if self._silent is None and self._pool.get_size() > self._pool.get_idle_size():
            await self.going_without("connections still in use at the close")
        await close_pool(self._pool, PROBE_WAIT if self._silent is not None else POOL_CLOSE_TIMEOUT)

    async def handoffs(self, *, max_chars: int = 100_000) -> HandoffStore:
        """The hand-off letters, beside the memories they name."""
        return HandoffStore(await self.store(), max_chars=max_chars)

    async def sessions(self) -> LoopSessionStore:
        """The memory loop's sessions, archive, seen-set, suggestions and capsules."""
        return LoopSessionStore(await self.store())

    async def images(self) -> ImageStore:
        """Memories with an image: storing one (checked, thumbnailed, described), and its image back."""
        images = ImageStore(await self.store(), self.settings)
        if not self._swept:  # once a process: files a store killed midway left behind
            self._swept = True
            await images.sweep()
        return images
