"""Recall after each move (`play --memory` in tools mode): the game's answers reach the model as this
server's tool results, so the memories for the room and the answer go with them, as they go under the
status line in text mode: the same queries, the same threshold, the run's seen-set. Help, never a gate:
with the database away an act answers without them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from frobozz.games import memory_queries

from .settings import Settings

if TYPE_CHECKING:
    from frobozz.memory import MemoryService, Recall

log = logging.getLogger("frobozz.servers.game")
LIMIT = 3  # memories with one answer
DEADLINE = 1.5  # seconds recall may add to an act
START_WAIT = 30.0  # seconds the first act waits for the database and the embedding model


class MoveRecall:
    """`service`: one shared with other servers in the process (`MemoryService.sharing`), left open at the end;
    else (a stdio server) it opens its own as it starts, and closes it."""

    def __init__(self, settings: Settings, service: MemoryService | None = None) -> None:
        self.settings = settings
        self.namespace, self.session_id = settings.game_recall_namespace, settings.game_recall_session
        self._given = service
        self._own: MemoryService | None = None  # the one it made when given none: closed with it
        self._service: MemoryService | None = None  # the one recall works on, given or made
        self._recall: Recall | None = None
        self._started = anyio.Event()

    @property
    def enabled(self) -> bool:
        return self.settings.recalls

    async def start(self) -> None:
        """Connect and load the embedding model (in the background, as the server starts)."""
        try:
            if not self.enabled:
                return
            # memory (numpy, the embedder, asyncpg: ~0.2 s of CPU) is imported only by a server that recalls
            from frobozz.memory import MemoryService, MemoryStoreError, Recall

            service = self._given
            if service is None:
                memory = self.settings.memory_settings()
                assert memory is not None  # (it recalls)
                service = self._own = MemoryService(memory)
            self._service = service
            try:
                store = await service.store()
                self._recall = Recall(store, await service.sessions(), limit=LIMIT, deadline=DEADLINE, context=False)
                await store.embedder.embed(["warming up"])
            except (MemoryStoreError, OSError) as e:
                log.warning("game: recall is off, memory could not be opened: %s", e)
                self._recall = None
        finally:
            self._started.set()

    async def __call__(self, location: str | None, text: str) -> list[str]:
        """The memories for this room and answer not shown before in the run, as the model sees them."""
        if not self.enabled:
            return []
        with anyio.move_on_after(START_WAIT):
            await self._started.wait()
        if self._recall is None or self.session_id is None or self.namespace is None:
            return []
        from frobozz.memory import memory_line, quietly

        queries = memory_queries(location, text)
        if not queries:
            return []
        hits = await quietly(
            "recall",
            self._recall(self.session_id, self.namespace, queries[0], extra=queries[1:]),
            [],
            within=DEADLINE + 0.5,
            service=self._service,  # a database that hangs is waited out once, not after every act
        )
        return [memory_line(h.memory) for h in hits]

    async def aclose(self) -> None:
        """Closes the service it opened; one it was given is its giver's."""
        if self._own is not None:
            await self._own.aclose()
