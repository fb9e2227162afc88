"""What a session says to its clients: typed events, each with the name the event relay sends it under.

`TextDelta` is a true delta (the text added since the last one, never the text so far); `Status` moves
`idle` → `streaming` → `waiting` (for an answer) → … → `idle`; `Done` ends a turn."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

State = Literal["idle", "streaming", "waiting", "closed"]


@dataclass(frozen=True)
class AgentEvent:
    kind: ClassVar[str]

    def data(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TextDelta(AgentEvent):
    kind: ClassVar[str] = "text_delta"
    text: str


@dataclass(frozen=True)
class ToolUse(AgentEvent):
    kind: ClassVar[str] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult(AgentEvent):
    kind: ClassVar[str] = "tool_result"
    tool_use_id: str
    output: Any
    is_error: bool


@dataclass(frozen=True)
class Question(AgentEvent):
    kind: ClassVar[str] = "question"
    question_id: str
    questions: list[dict[str, Any]]


@dataclass(frozen=True)
class Status(AgentEvent):
    kind: ClassVar[str] = "status"
    state: State
    message_id: str | None = None  # the message whose turn this streaming begins (or idle ends)


@dataclass(frozen=True)
class Done(AgentEvent):
    kind: ClassVar[str] = "done"
    usage: dict[str, Any] = field(default_factory=dict)
    cost_usd: float | None = None
    is_error: bool = False
    result: str | None = None
    message_id: str | None = None  # the message this turn answered


@dataclass(frozen=True)
class Error(AgentEvent):
    kind: ClassVar[str] = "error"
    message: str


KINDS: dict[str, type[AgentEvent]] = {
    c.kind: c for c in (TextDelta, ToolUse, ToolResult, Question, Status, Done, Error)
}


def from_data(kind: str, data: dict[str, Any]) -> AgentEvent:
    """An event as it was logged (the relay's replay after a restart)."""
    return KINDS[kind](**data)


@dataclass(frozen=True)
class Logged:
    """An event in a session's log: its per-session sequence number (the SSE `id:`) and the event."""

    seq: int
    event: AgentEvent
