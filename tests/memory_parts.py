"""Which of memory's parts started, for a test of a database that hangs: a part left out while memory is off is
made (its coroutine) but never started, and one that started there waited out its bound; so what is counted is
the start, not the call."""

from __future__ import annotations

from typing import Any

import pytest

from frobozz.memory import LoopSessionStore, Recall

PARTS = {
    "recall": (Recall, "__call__"),
    "the nudge": (LoopSessionStore, "suggestions"),
    "a new window": (LoopSessionStore, "new_window"),
    "archiving": (LoopSessionStore, "archive"),
}


class PartsStarted:
    """From its making on (undone with `monkeypatch`): `started` names each part as it starts, in order; an archive
    entry by its kind ("archiving: user")."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started: list[str] = []
        for name, (owner, attribute) in PARTS.items():
            monkeypatch.setattr(owner, attribute, self._spy(name, getattr(owner, attribute)))

    def _spy(self, name: str, work: Any) -> Any:
        async def started(*args: Any, **kwargs: Any) -> Any:
            kind = kwargs.get("kind", args[3] if name == "archiving" and len(args) > 3 else None)
            self.started.append(f"{name}: {kind}" if kind else name)
            return await work(*args, **kwargs)

        return started

    def mark(self) -> int:
        return len(self.started)

    def since(self, mark: int) -> list[str]:
        """The parts of turns started since `mark`: not the archive observer's entries of what claude said (it runs
        a little behind the turns, and may still be writing the last one's when the database hangs)."""
        return [p for p in self.started[mark:] if not p.startswith("archiving: ") or p == "archiving: user"]
