"""Which of memory's parts started, for a test of a database that hangs: a part left out while memory is off is
made (its coroutine) but never started, and one that started there waited out its bound; so what is counted is
the start, not the call."""

from __future__ import annotations

from typing import Any

import pytest

from frobozz.memory import HandoffStore, LoopSessionStore, MemoryStore, Recall, TranscriptStore

PARTS = {
    "recall": (Recall, "__call__"),
    "the nudge": (LoopSessionStore, "suggestions"),
    "a new window": (LoopSessionStore, "new_window"),
    "archiving": (LoopSessionStore, "archive"),
}
# with what the plugin's other hooks and its background work start (not in PARTS: the loop suggests and writes
# capsules in the background, beside the turns a test of it counts)
EVERY_PART = {
    **PARTS,
    "the session's record": (LoopSessionStore, "adopt"),
    "the turns": (LoopSessionStore, "transcript"),
    "clearing the suggestions": (LoopSessionStore, "clear_suggestions"),
    "suggesting": (LoopSessionStore, "suggest"),
    "the sessions": (LoopSessionStore, "list"),
    "searching the archive": (LoopSessionStore, "search_archive"),
    "a capsule": (LoopSessionStore, "capsule"),
    "writing a capsule": (LoopSessionStore, "put_capsule"),
    "the hand-off letter": (HandoffStore, "latest"),
    "writing a hand-off letter": (HandoffStore, "write"),
    "the newest memories": (MemoryStore, "recent"),
    "the transcript store": (TranscriptStore, "on"),
    "keeping the transcript": (TranscriptStore, "append"),
}


class PartsStarted:
    """From its making on (undone with `monkeypatch`): `started` names each part as it starts, in order; an archive
    entry by its kind ("archiving: user")."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, parts: dict[str, tuple[type, str]] = PARTS) -> None:
        self.started: list[str] = []
        for name, (owner, attribute) in parts.items():
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
