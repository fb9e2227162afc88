"""One engine's spans, through the OpenTelemetry API only: a session span, a trace per turn (linked to the
session, carrying claude's session id), a span per model request (the proxy opens it) and per tool call.

With no SDK configured nothing is made: every method returns at its first line. Tool spans open when the
proxy sees the model ask for the tool (before claude itself has read it), so a Frobozz MCP server that
asks for its call's trace context (by the tool_use id claude puts in the request's `_meta`) always
finds it; they close at the tool's result, and end as "denied" when the turn's result says so.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind

from .. import _spans as S
from ._events import AssistantMessage, Result, UserMessage
from ._prices import cost
from .observers._tool_log import input_size, target_of

_PRICES_LOADING: list[threading.Thread] = []


def load_prices() -> None:
    """genai-prices' table, loaded on a thread of its own as a traced engine starts (it takes half a second:
    the package imports its table at the first price asked, not at its own import), so the first request's
    span does not hold the proxy's event loop up while it loads."""
    if not _PRICES_LOADING:
        thread = threading.Thread(
            target=lambda: request_cost("claude-sonnet-4-5", {}), name="frobozz-prices", daemon=True
        )
        _PRICES_LOADING.append(thread)
        thread.start()


def request_cost(model: str | None, usage: Mapping[str, int]) -> float | None:
    """One model request's cost in USD at the provider's list price (genai-prices' table, from rates worked out
    once per model: see `_prices`; claude's own reckoning is the turn's), or None for a model the table does
    not know."""
    if not model:
        return None
    try:
        price = cost(model, usage)
    except ImportError:
        return None
    return float(price) if price is not None else None


def claude_resource(env: dict[str, str], session_id: str) -> None:
    """claude's own telemetry (its metrics and events) under `session_id` as a resource attribute, beside the
    resource attributes the user set (OTEL_RESOURCE_ATTRIBUTES' `key=value,…`; a session.id of theirs is
    replaced): a backend then finds claude's telemetry and Frobozz's spans of one session by the same id."""
    own = [
        m
        for m in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")
        if m.strip() and m.partition("=")[0].strip() != S.SESSION_ID
    ]
    env["OTEL_RESOURCE_ATTRIBUTES"] = ",".join([*own, f"{S.SESSION_ID}={session_id}"])


@dataclass
class _Tool:
    span: Span
    name: str
    ended_ns: int | None = None
    outcome: str = "ok"
    attributes: dict[str, Any] = field(default_factory=dict)


class EngineTrace:
    """The spans of one engine. `content` is how many characters of prompt and completion text a span may
    carry (None: none at all, the default, as the GenAI conventions ask)."""

    def __init__(
        self, attributes: Mapping[str, Any] | None = None, *, content: int | None = None, cwd: str | None = None
    ) -> None:
        self.recording = S.recording()  # tracing is set up: this engine's spans are made (a spare's once taken)
        self.on = self.recording  # spans are made now (not while `hold` lasts)
        if self.on:
            load_prices()
        self.attributes = {k: v for k, v in (attributes or {}).items() if v is not None}
        self.content = content
        self.cwd = cwd
        self.session: Span | None = None
        self.turn: Span | None = None
        self.turns = 0
        self.session_id: str | None = None
        self._tools: dict[str, _Tool] = {}
        self._prepared = False  # a turn opened before its message is sent (the memory loop's work is in it)

    # -- the session and its turns ------------------------------------------------------------------
    def hold(self) -> None:
        """Nothing is traced from now until `take_over`: a warm spare's start, its rehearsed turns and its wait
        are nobody's session (a session that takes it over begins its own there)."""
        self.on = False

    def take_over(self, attributes: Mapping[str, Any] | None) -> None:
        """A session takes this claude over now (a warm spare's): a session span of its own, with its attributes,
        linked to the taker's current span (a routine's firing, a queued job: the session is its work), its
        turns counted from 1 and claude's session id told afresh (the taker's session begins with its first
        message). A span this engine had begun before (it was not held) ends here."""
        self.close()
        self.on = self.recording
        self.attributes = {k: v for k, v in (attributes or {}).items() if v is not None}
        self.turns = 0
        self.session_id = None
        self._prepared = False
        self.start()

    def start(self) -> None:
        if not self.on or self.session is not None:
            return
        caller = trace.get_current_span().get_span_context()  # a queued job's, say: the session is its work
        self.session = S.tracer().start_span(
            S.SESSION,
            context=otel_context.Context(),
            attributes=self.attributes,
            links=[Link(caller)] if caller.is_valid else [],
        )

    def set_session_id(self, session_id: str | None) -> None:
        if not self.on or not session_id or session_id == self.session_id:
            return
        self.session_id = session_id
        for span in (self.session, self.turn):
            if span is not None:
                span.set_attributes({S.SESSION_ID: session_id, S.GEN_AI_CONVERSATION_ID: session_id})

    def prepare_turn(self, parent: otel_context.Context | None = None) -> otel_context.Context:
        """Open the next turn's span before its message is sent, so what makes the message (orientation,
        recall) is in its trace; the next `begin_turn` takes it up. Under `parent` (a sidecar's question,
        inside the recall that asks it) rather than as a trace of its own. The turn's context."""
        if self.on and not self._prepared:
            self._open_turn(parent)
            self._prepared = True
        return self.context()

    def begin_turn(self, content: Any) -> None:
        """A user message sent: a new trace (or the prepared turn's), its root linked to the session's span."""
        if not self.on:
            return
        if not self._prepared:
            self._open_turn(None)
        self._prepared = False
        if self.content is not None and self.turn is not None:
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
            self.turn.set_attribute(S.GEN_AI_INPUT_MESSAGES, S.cut(text, self.content))

    def _open_turn(self, parent: otel_context.Context | None) -> None:
        self.end_turn(outcome="superseded")
        self.turns += 1
        attributes = {**self.attributes, S.TURN_NUMBER: self.turns}
        if self.session_id:
            attributes[S.SESSION_ID] = attributes[S.GEN_AI_CONVERSATION_ID] = self.session_id
        links = [Link(self.session.get_span_context())] if self.session is not None else []
        self.turn = S.tracer().start_span(
            S.TURN, context=parent or otel_context.Context(), links=links, attributes=attributes
        )

    def end_turn(self, result: Result | None = None, *, outcome: str = "result", error: str | None = None) -> None:
        if not self.on or self.turn is None:
            return
        turn, self.turn = self.turn, None
        ended: dict[str, Any] = {}  # written in one call: each call takes the span's lock and checks its values
        if result is not None:
            denied = {d.get("tool_use_id") for d in result.raw.get("permission_denials") or () if isinstance(d, dict)}
            self._close_tools(denied)
            for key, value in (
                (S.COST_USD, result.total_cost_usd),
                (S.NUM_TURNS, result.num_turns),
                (S.DURATION_API_MS, result.raw.get("duration_api_ms")),
            ):
                if isinstance(value, int | float):
                    ended[key] = value
            if result.is_error:
                error = error or result.result or f"the turn ended in {result.subtype}"
        else:
            self._close_tools(set())
        ended[S.TURN_OUTCOME] = outcome if error is None or outcome != "result" else "error"
        turn.set_attributes(ended)
        if error is not None:
            S.record_error(turn, error)
        turn.end()

    def context(self) -> otel_context.Context:
        """The context a model request or tool call of now belongs under: the open turn, else the session."""
        span = self.turn or self.session
        return trace.set_span_in_context(span) if span is not None else otel_context.Context()

    def compacted(self, trigger: str | None, pre_tokens: int | None) -> None:
        span = self.turn or self.session
        if self.on and span is not None:
            span.add_event(S.COMPACTION, {S.COMPACTION_TRIGGER: trigger or "", S.COMPACTION_TOKENS: pre_tokens or 0})

    def context_for(self, tool_use_id: Any) -> otel_context.Context:
        """Under the tool call's span when there is one (a permission question, a hook), else the turn's."""
        tool = self._tools.get(tool_use_id) if isinstance(tool_use_id, str) else None
        return trace.set_span_in_context(tool.span) if tool is not None else self.context()

    def close(self, error: str | None = None) -> None:
        if not self.on:
            return
        self.end_turn(outcome="error" if error is not None else "unsent" if self._prepared else "closed", error=error)
        if self.session is not None:
            self.session.set_attribute(S.NUM_TURNS, self.turns)
            if error is not None:
                S.record_error(self.session, error)
            self.session.end()
            self.session = None

    # -- model requests (opened by the proxy) --------------------------------------------------------
    def model_request(self, payload: Mapping[str, Any] | None, headers: Mapping[str, str]) -> Span | None:
        if not self.on:
            return None
        model = (payload or {}).get("model")
        attributes: dict[str, Any] = {
            S.GEN_AI_OPERATION: "chat",
            S.GEN_AI_PROVIDER: "anthropic",
            S.GEN_AI_SYSTEM: "anthropic",
        }
        if isinstance(model, str):
            attributes[S.GEN_AI_REQUEST_MODEL] = model
        max_tokens = (payload or {}).get("max_tokens")
        if isinstance(max_tokens, int):
            attributes[S.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
        if self.session_id:
            attributes[S.SESSION_ID] = attributes[S.GEN_AI_CONVERSATION_ID] = self.session_id
        retry = headers.get("x-stainless-retry-count")
        if retry and retry.isdigit():
            attributes[S.MODEL_RETRY] = int(retry)
        if self.content is not None and payload:
            attributes[S.GEN_AI_INPUT_MESSAGES] = S.cut(
                json.dumps(payload.get("messages") or [], ensure_ascii=False), self.content, newest=True
            )
            if payload.get("system"):
                system = payload["system"]
                attributes[S.GEN_AI_SYSTEM_INSTRUCTIONS] = S.cut(
                    system if isinstance(system, str) else json.dumps(system, ensure_ascii=False), self.content
                )
        name = f"{S.CHAT} {model}" if isinstance(model, str) else S.CHAT
        return S.tracer().start_span(name, context=self.context(), kind=SpanKind.CLIENT, attributes=attributes)

    # -- tool calls -----------------------------------------------------------------------------------
    def tool_started(self, tool_use_id: str, name: str) -> None:
        """The model asked for a tool (the proxy saw its block begin, or the assistant message came)."""
        if not self.on or not tool_use_id or tool_use_id in self._tools:
            return
        mcp = name.startswith("mcp__")
        attributes: dict[str, Any] = {
            S.GEN_AI_OPERATION: "execute_tool",
            S.GEN_AI_TOOL_NAME: name,
            S.GEN_AI_TOOL_CALL_ID: tool_use_id,
            S.GEN_AI_TOOL_TYPE: "extension" if mcp else "function",
        }
        if mcp:
            attributes[S.MCP_METHOD] = "tools/call"
        if self.session_id:
            attributes[S.SESSION_ID] = self.session_id
        span = S.tracer().start_span(
            f"{S.EXECUTE_TOOL} {name}",
            context=self.context(),
            kind=SpanKind.CLIENT if mcp else SpanKind.INTERNAL,
            attributes=attributes,
        )
        self._tools[tool_use_id] = _Tool(span, name)

    def traceparent(self, tool_use_id: str) -> dict[str, Any] | None:
        """The W3C context of a tool call's span, for the MCP server that runs it, with claude's session id as
        baggage (the server's own spans carry it too)."""
        tool = self._tools.get(tool_use_id)
        return S.inject(span=tool.span, session_id=self.session_id) if tool is not None else None

    def on_assistant(self, event: AssistantMessage) -> None:
        if not self.on or event.is_replay:
            return
        for use in event.tool_uses:
            self.tool_started(use.id, use.name)
            tool = self._tools[use.id]
            tool.attributes.update(
                {S.TOOL_TARGET: target_of(use.input, self.cwd), S.TOOL_INPUT_SIZE: input_size(use.name, use.input)}
            )

    def on_user(self, event: UserMessage) -> None:
        if not self.on or event.is_replay:
            return
        for result in event.tool_results:
            tool = self._tools.get(result.tool_use_id)
            if tool is None or tool.ended_ns is not None:
                continue
            content = result.content
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
            tool.ended_ns = time.time_ns()
            tool.attributes[S.TOOL_OUTPUT_CHARS] = len(text or "")
            if result.is_error:
                tool.outcome = "error"
                tool.attributes[S.TOOL_ERROR] = S.cut(text or "", 500) if self.content is not None else ""

    def _close_tools(self, denied: set[Any]) -> None:
        """The turn's tool spans end: at their result's time, as denied when the result says so."""
        for tool_use_id, tool in list(self._tools.items()):
            if tool.ended_ns is None and tool_use_id not in denied:
                tool.outcome = "unfinished"
            if tool_use_id in denied:
                tool.outcome = "denied"
            tool.attributes[S.TOOL_OUTCOME] = tool.outcome
            tool.span.set_attributes({k: v for k, v in tool.attributes.items() if v != ""})
            if tool.outcome != "ok":
                S.record_error(
                    tool.span,
                    f"the tool call was {tool.outcome}"
                    if tool.outcome != "error"
                    else "the tool answered with an error",
                )
            tool.span.end(end_time=tool.ended_ns)
        self._tools.clear()
