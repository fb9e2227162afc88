"""The MemoryServices a test's code makes: the database pools and embedding models they hold, and which of them
were closed (a process that serves several servers should hold one of each)."""

from __future__ import annotations

from typing import Any

import pytest

from frobozz.memory import MemoryService


class ServicesSeen:
    """From its making on (undone with `monkeypatch`): every MemoryService made, every pool a store was opened on,
    every service closed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[MemoryService] = []
        self.closed: list[MemoryService] = []
        self._pools: list[Any] = []  # (kept, so that no two ids are one)
        init, store, aclose = MemoryService.__init__, MemoryService.store, MemoryService.aclose

        def made(service: MemoryService, *args: Any, **kwargs: Any) -> None:
            init(service, *args, **kwargs)
            self.made.append(service)

        async def stored(service: MemoryService, **kwargs: Any) -> Any:
            opened = await store(service, **kwargs)
            self._pools.append(opened.pool)
            return opened

        async def closed(service: MemoryService) -> None:
            self.closed.append(service)
            await aclose(service)

        monkeypatch.setattr(MemoryService, "__init__", made)
        monkeypatch.setattr(MemoryService, "store", stored)
        monkeypatch.setattr(MemoryService, "aclose", closed)

    @property
    def pools(self) -> list[Any]:
        """The database pools the services' stores were on, each once."""
        return list({id(p): p for p in self._pools}.values())

    @property
    def embedders(self) -> list[Any]:
        """The embedding models of the services made, each once."""
        return list({id(s.embedder): s.embedder for s in self.made}.values())
