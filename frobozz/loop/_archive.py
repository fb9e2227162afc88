"""The archive observer: everything a session says and does goes to Postgres as it happens (the
assistant's text, tool calls and results in brief, each turn's usage), so a claude that crashes
mid-turn loses nothing that was seen. The user's own words are archived by whoever sends them
(`archive_user`), before claude sees them. It also notices the model storing a memory through
cortex (or superseding one), which empties the session's suggestion buffer.

With a `guard` (the memory loop's), each write is bounded, and left out while memory is off: a database
that hangs holds the observer no longer than the guard's bound, and it keeps up with the conversation."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

import anyio

from ..engine import AssistantMessage, Event, Result, UserMessage, text_of
from ..memory import LoopSessionStore

log = logging.getLogger("frobozz.loop")
T = TypeVar("T")
WRITE_WAIT = 10.0  # seconds a guarded write may take before the guard looks into why
BRIEF = 500  # characters of a tool call's input or result kept in the archive
STORE_TOOLS = ("mcp__cortex__store", "mcp__frobozz-cortex__store")


def _brief(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= BRIEF else text[:BRIEF] + f"… ({len(text)} characters)"


class Guard(Protocol):
    """`work`'s result, or `default` when memory cannot take it (see MemorySession._quietly)."""

    async def __call__(self, part: str, work: Awaitable[T], default: T, *, within: float | None = None) -> T: ...


async def _unguarded(part: str, work: Awaitable[T], default: T, *, within: float | None = None) -> T:
    return await work  # a failure is the router's to report


class ArchiveObserver:
    """An engine observer (async: each event is committed before the next is taken)."""

    name = "memory archive"

    def __init__(
        self, sessions: LoopSessionStore, session_id: str, *, turn: int = 1, guard: Guard | None = None
    ) -> None:
        self.sessions, self.session_id = sessions, session_id
        self.turn = turn
        self.guard: Guard = guard or _unguarded
        self._settled = anyio.Event()  # the last turn's result is archived: the next user message may follow
        self._settled.set()

    async def archive_user(self, text: str, *, settle: float = 5.0, data: dict[str, Any] | None = None) -> None:
        """Archive what the user says next, after the last turn's own entries (the observer runs on
        a task of its own, and may still be writing them), waiting at most `settle` seconds."""
        with anyio.move_on_after(settle):
            await self._settled.wait()
        self._settled = anyio.Event()
        await self.sessions.archive(self.session_id, self.turn, "user", text, data)

    async def on_event(self, event: Event) -> None:
        if event.is_replay:  # a resumed session's history: archived when it happened
            return
        if isinstance(event, AssistantMessage) and not event.parent_tool_use_id:
            if event.text.strip():
                await self._write(self.sessions.archive(self.session_id, self.turn, "assistant", event.text))
            for use in event.tool_uses:
                await self._write(
                    self.sessions.archive(
                        self.session_id,
                        self.turn,
                        "tool_use",
                        f"{use.name} {_brief(dict(use.input))}",
                        {"id": use.id, "tool": use.name},
                    )
                )
                if use.name in STORE_TOOLS or use.name.endswith(("cortex__store", "cortex__supersede")):
                    await self._write(self.sessions.clear_suggestions(self.session_id))
        elif isinstance(event, UserMessage) and not event.parent_tool_use_id:
            for result in event.tool_results:
                await self._write(
                    self.sessions.archive(
                        self.session_id,
                        self.turn,
                        "tool_result",
                        _brief(text_of(result.content)),
                        {"id": result.tool_use_id, "is_error": result.is_error},
                    )
                )
        elif isinstance(event, Result):
            try:
                usage = {k: v for k, v in event.usage.items() if isinstance(v, int | float)}
                await self._write(
                    self.sessions.archive(
                        self.session_id,
                        self.turn,
                        "usage",
                        event.result or "",
                        {**usage, "cost_usd": event.total_cost_usd or 0.0, "is_error": event.is_error},
                    )
                )
                if event.session_id:
                    await self._write(self.sessions.set_claude_session(self.session_id, event.session_id))
            finally:  # the turn ends even when the database could not take its entries
                self.turn += 1
                self._settled.set()

    async def _write(self, work: Awaitable[object]) -> None:
        await self.guard("archiving the conversation", work, None, within=WRITE_WAIT)
