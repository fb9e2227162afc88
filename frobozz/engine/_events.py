"""Typed, immutable events: what the claude CLI said, what the engine noticed, and what came from disk.

Every event keeps the JSON it was made from (`raw`) and says whether it is a replay of history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingBlock:
    thinking: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: Any
    is_error: bool = False


Block = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    is_replay: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class McpServerStatus:
    name: str
    status: str  # "pending" while claude starts it, then "connected" or "failed" (and others claude may add)
    error: str | None = None
    tools: tuple[str, ...] = ()  # the server's own tool names (claude's mcp_status says them; init does not)

    @classmethod
    def parse(cls, d: Mapping[str, Any]) -> McpServerStatus:
        return cls(
            name=str(d.get("name", "")),
            status=str(d.get("status", "")),
            error=d.get("error"),
            tools=tuple(str(t.get("name", "")) for t in d.get("tools") or () if isinstance(t, Mapping)),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextUsage:
    """How full claude's context window is (its answer to get_context_usage), by category."""

    total_tokens: int
    max_tokens: int
    percentage: float
    categories: tuple[tuple[str, int], ...]  # (name, tokens): "System prompt", "Messages", "Free space", …
    raw: Mapping[str, Any]

    @classmethod
    def parse(cls, d: Mapping[str, Any]) -> ContextUsage:
        return cls(
            total_tokens=int(d.get("totalTokens") or 0),
            max_tokens=int(d.get("maxTokens") or 0),
            percentage=float(d.get("percentage") or 0),
            categories=tuple(
                (str(c.get("name", "")), int(c.get("tokens") or 0))
                for c in d.get("categories") or ()
                if isinstance(c, Mapping)
            ),
            raw=d,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class SystemInit(Event):
    session_id: str | None
    model: str | None
    cwd: str | None
    tools: tuple[str, ...]
    mcp_servers: tuple[McpServerStatus, ...]
    permission_mode: str | None
    version: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class SystemMessage(Event):
    """A system line the engine has no closer type for (hooks, status, …)."""

    subtype: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiRetry(Event):
    attempt: int
    max_retries: int
    delay_ms: float
    status: int | None
    error: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactBoundary(Event):
    trigger: str | None
    pre_tokens: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantMessage(Event):
    session_id: str | None
    message_id: str | None
    model: str | None
    content: tuple[Block, ...]
    parent_tool_use_id: str | None = None
    error: str | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))


@dataclass(frozen=True, kw_only=True, slots=True)
class UserMessage(Event):
    """A user turn: tool results the CLI reports, or (in a replay) what the user said."""

    session_id: str | None
    content: tuple[Block, ...]
    parent_tool_use_id: str | None = None
    tool_use_result: Any = None
    uuid: str | None = None  # the message's id in the transcript: what `Engine.rewind_files` takes

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamEvent(Event):
    """A partial message event (with --include-partial-messages): the Messages API's own SSE event."""

    event: Mapping[str, Any]
    session_id: str | None = None

    @property
    def text_delta(self) -> str:
        delta = self.event.get("delta") or {}
        return delta.get("text", "") if delta.get("type") == "text_delta" else ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Result(Event):
    """The end of a turn."""

    subtype: str
    is_error: bool
    result: str | None
    session_id: str | None
    num_turns: int | None
    duration_ms: int | None
    total_cost_usd: float | None
    usage: Mapping[str, Any]
    api_error_status: int | None = None
    stop_reason: str | None = None
    model_usage: Mapping[str, Any] = field(default_factory=dict)  # per model, as claude reports it
    structured: Any = None  # with EngineOptions.output_schema: the answer in that shape (typed by a pydantic model)

    @property
    def context_window(self) -> int | None:
        """The largest context window claude reports among the turn's models (side requests use smaller ones)."""
        windows = [m.get("contextWindow") for m in self.model_usage.values() if isinstance(m, Mapping)]
        return max((w for w in windows if isinstance(w, int) and w > 0), default=None)


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit(Event):
    info: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage(Event):
    """One model request seen by the engine's HTTP proxy: token use and rate-limit utilisation."""

    path: str
    status: int
    model: str | None
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    context_tokens: int
    context_high_water: int
    rate_limits: Mapping[str, str]
    rewritten: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorEvent(Event):
    """Something went wrong that the stream carries on past: an API error, a bad line, an observer."""

    source: str
    message: str
    status: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class MirrorError(ErrorEvent):
    """A batch of transcript entries the session store did not take (after its retries): the store misses
    them, claude's own transcript has them, and the conversation goes on."""

    session_id: str
    subpath: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcessExit(Event):
    exit_code: int | None
    stderr: str
    expected: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Restarted(Event):
    """The CLI died and was started again: resuming the same session when claude had written its
    transcript (`resumed`), else as a new session (claude writes transcripts a moment after a turn)."""

    session_id: str | None
    attempt: int
    reason: str
    resumed: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class UnknownEvent(Event):
    type: str


def parse_blocks(content: Any) -> tuple[Block, ...]:
    """A message's content (a string, or claude's list of blocks) as typed blocks; a kind not known is left out."""
    if isinstance(content, str):
        return (TextBlock(text=content),)
    blocks: list[Block] = []
    for b in content or ():
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            blocks.append(TextBlock(text=b.get("text", "")))
        elif kind == "thinking":
            blocks.append(ThinkingBlock(thinking=b.get("thinking", "")))
        elif kind == "tool_use":
            blocks.append(ToolUseBlock(id=b.get("id", ""), name=b.get("name", ""), input=b.get("input") or {}))
        elif kind == "tool_result":
            blocks.append(
                ToolResultBlock(
                    tool_use_id=b.get("tool_use_id", ""), content=b.get("content"), is_error=bool(b.get("is_error"))
                )
            )
    return tuple(blocks)


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text blocks of a block list, joined by spaces."""
    return " ".join(b.text for b in parse_blocks(content) if isinstance(b, TextBlock))


def _system(d: dict[str, Any], replay: bool) -> Event:
    subtype = d.get("subtype")
    if subtype == "init":
        servers = tuple(McpServerStatus.parse(s) for s in d.get("mcp_servers") or () if isinstance(s, Mapping))
        return SystemInit(
            raw=d,
            is_replay=replay,
            session_id=d.get("session_id"),
            model=d.get("model"),
            cwd=d.get("cwd"),
            tools=tuple(d.get("tools") or ()),
            mcp_servers=servers,
            permission_mode=d.get("permissionMode"),
            version=d.get("claude_code_version"),
        )
    if subtype == "api_retry":
        return ApiRetry(
            raw=d,
            is_replay=replay,
            attempt=d.get("attempt", 0),
            max_retries=d.get("max_retries", 0),
            delay_ms=d.get("retry_delay_ms", 0.0),
            status=d.get("error_status"),
            error=d.get("error"),
        )
    if subtype == "compact_boundary":
        meta = d.get("compact_metadata") or {}
        return CompactBoundary(raw=d, is_replay=replay, trigger=meta.get("trigger"), pre_tokens=meta.get("pre_tokens"))
    return SystemMessage(raw=d, is_replay=replay, subtype=subtype)


def parse_event(d: dict[str, Any], *, is_replay: bool = False) -> Event:
    """One stdout JSON object (or transcript line) as a typed event; unknown types are kept, not dropped."""
    kind = d.get("type")
    if kind == "assistant":
        m = d.get("message") or {}
        return AssistantMessage(
            raw=d,
            is_replay=is_replay,
            session_id=d.get("session_id") or d.get("sessionId"),
            message_id=m.get("id"),
            model=m.get("model"),
            content=parse_blocks(m.get("content")),
            parent_tool_use_id=d.get("parent_tool_use_id"),
            error=d.get("error"),
        )
    if kind == "stream_event":
        return StreamEvent(raw=d, is_replay=is_replay, event=d.get("event") or {}, session_id=d.get("session_id"))
    if kind == "user":
        m = d.get("message") or {}
        return UserMessage(
            raw=d,
            is_replay=is_replay,
            session_id=d.get("session_id") or d.get("sessionId"),
            content=parse_blocks(m.get("content")),
            parent_tool_use_id=d.get("parent_tool_use_id"),
            tool_use_result=d.get("tool_use_result"),
            uuid=d.get("uuid"),
        )
    if kind == "result":
        return Result(
            raw=d,
            is_replay=is_replay,
            subtype=d.get("subtype", ""),
            is_error=bool(d.get("is_error")),
            result=d.get("result"),
            session_id=d.get("session_id"),
            num_turns=d.get("num_turns"),
            duration_ms=d.get("duration_ms"),
            total_cost_usd=d.get("total_cost_usd"),
            usage=d.get("usage") or {},
            api_error_status=d.get("api_error_status"),
            stop_reason=d.get("stop_reason"),
            model_usage=d.get("modelUsage") or {},
            structured=d.get("structured_output"),
        )
    if kind == "system":
        return _system(d, is_replay)
    if kind == "rate_limit_event":
        return RateLimit(raw=d, is_replay=is_replay, info=d.get("rate_limit_info") or d)
    return UnknownEvent(raw=d, is_replay=is_replay, type=str(kind))
