"""The memory store for a long-running process (a server, the memory loop): opened on first use and
again after a failure, so a database that is down at start or goes away stops nothing: the next
call tries again."""

from __future__ import annotations

import logging

import anyio
import asyncpg

from ._database import close_pool, connect, database_url, migrate
from ._embeddings import Embedder, make_embedder
from ._handoffs import HandoffStore
from ._image_store import ImageStore
from ._loop_sessions import LoopSessionStore
from ._store import MemoryStore
from .exceptions import DatabaseError
from .settings import MemorySettings

log = logging.getLogger("frobozz.memory")


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

    async def store(self, *, check_model: bool = True) -> MemoryStore:
        """The store; `check_model=False` only for re-embedding, which is how a mismatch is mended."""
        async with self._lock:
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
                pool = await connect(await database_url(self.settings), self.settings.cortex_pool_size)
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

    async def aclose(self) -> None:
        if self._pool is not None:
            await close_pool(self._pool)

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
