"""Tracing's one vocabulary: every span name and attribute key Frobozz uses, and the helpers that carry
a trace context in a mapping (an MCP request's `_meta`, a queued job's row).

The OpenTelemetry API only: the parts emit spans through it and never configure it. With no SDK
configured (no `--trace`) every span is a non-recording no-op, so tracing off costs nothing.
Names follow OpenTelemetry's semantic conventions where there are some (GenAI `gen_ai.*`, MCP
`mcp.*`, messaging `messaging.*`, `session.id`, `error.type`); Frobozz's own facts are `frobozz.*`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

__all__ = ["Span", "SpanKind", "Status", "StatusCode"]  # re-exported for the parts, with the names below

TRACER_NAME = "frobozz"

# -- span names ----------------------------------------------------------------------------------
SESSION = "frobozz.session"  # one claude session (a play run, a chat, an agent session): its own trace
TURN = "frobozz.turn"  # one user message and everything up to its result: the root of a trace of its own
CHAT = "chat"  # one model request seen by the engine's proxy: "chat {model}" (GenAI conventions)
EXECUTE_TOOL = "execute_tool"  # one tool call of claude's: "execute_tool {tool}" (GenAI conventions)
MCP_TOOLS_CALL = "tools/call"  # a Frobozz MCP server's side of a call: "tools/call {tool}" (MCP conventions)
EMBED = "frobozz.memory.embed"
SQL = "frobozz.memory.sql"
SCORE = "frobozz.memory.score"
ORIENTATION = "frobozz.memory.orientation"
RECALL = "frobozz.memory.recall"
SUGGEST = "frobozz.memory.suggest"
ARCHIVE = "frobozz.memory.archive"
GAME_ACT = "frobozz.game.act"
PERMISSION = "frobozz.permission"  # a permission question: the span's length is the time the answer took
HOOK = "frobozz.hook"
COMPACTION = "frobozz.compaction"  # an event on the turn's span: claude compacted its context there
HANDOFF = "frobozz.handoff"  # the hand-off relay's step (compact with a letter, or ask for one): in the turn it begins
HANDOFF_WRITE = "frobozz.memory.handoff.write"  # the handoff server's letter kept (its memories embedded and stored)
HANDOFF_READ = "frobozz.memory.handoff.read"  # a letter read (the latest, or one by id)
ROUTINE_FIRE = "frobozz.routine.fire"  # a routine's firing, from its job taken to its end (its session linked)
QUEUE_SEND = "send runs"  # messaging conventions: "{operation} {destination}"
QUEUE_PROCESS = "process runs"

# -- attribute keys: OpenTelemetry's conventions -----------------------------------------------------
SESSION_ID = "session.id"  # claude's session id: backends (Phoenix, Langfuse) group traces by it
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"  # the older name of the provider, still read by most backends
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_COST = "gen_ai.usage.cost"  # USD at list price: not in the conventions yet; the name OpenLIT and Langfuse read
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # content: only with capture on
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"  # content: only with capture on
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"  # content: only with capture on
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
MCP_METHOD = "mcp.method.name"
MCP_SESSION_ID = "mcp.session.id"
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION = "messaging.operation.type"
MESSAGING_DESTINATION = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
DB_OPERATION = "db.operation.name"
DB_ROWS = "db.response.returned_rows"

# -- attribute keys: Frobozz's own ------------------------------------------------------------------
SESSION_KIND = "frobozz.session.kind"  # play, chat, agent, routine
RUN_ID = "frobozz.run.id"
RUN_MODE = "frobozz.run.mode"  # text, tools
GAME = "frobozz.game"
WORKER = "frobozz.worker"
TURN_NUMBER = "frobozz.turn.number"
TURN_OUTCOME = "frobozz.turn.outcome"  # result, error, restarted, closed
COST_USD = "frobozz.cost_usd"  # claude's own reckoning, on the turn that spent it
DURATION_API_MS = "frobozz.duration_api_ms"
NUM_TURNS = "frobozz.num_turns"  # claude's model round trips in the turn
TIME_TO_FIRST_TOKEN_MS = "frobozz.model.time_to_first_token_ms"
MODEL_RETRY = "frobozz.model.retry"  # the client's own retry count of this request (x-stainless-retry-count)
MODEL_REWRITTEN = "frobozz.model.compaction_rewritten"
RATE_LIMIT_PREFIX = "frobozz.model.ratelimit."  # + the header's tail: unified-status, unified-reset, …
CONTEXT_TOKENS = "frobozz.model.context_tokens"
TOOL_TARGET = "frobozz.tool.target"
TOOL_INPUT_SIZE = "frobozz.tool.input_size"
TOOL_OUTPUT_CHARS = "frobozz.tool.output_chars"
TOOL_OUTCOME = "frobozz.tool.outcome"  # ok, error, denied, unfinished
TOOL_ERROR = "frobozz.tool.error"  # the error's text: content, only with capture on
MEMORY_NAMESPACE = "frobozz.memory.namespace"
MEMORY_QUERY_COUNT = "frobozz.memory.queries"
MEMORY_FOUND = "frobozz.memory.found"
MEMORY_IDS = "frobozz.memory.ids"
MEMORY_SCORES = "frobozz.memory.scores"
ORIENTATION_CHARS = "frobozz.memory.orientation_chars"
PERMISSION_DECISION = "frobozz.permission.decision"  # allow, deny
HOOK_EVENT = "frobozz.hook.event"  # PreToolUse, PostToolUse, …
COMPACTION_TRIGGER = "frobozz.compaction.trigger"  # manual, auto
COMPACTION_TOKENS = "frobozz.compaction.pre_tokens"
GAME_COMMAND = "frobozz.game.command"  # the player's command: content, only with capture on
GAME_SCORE = "frobozz.game.score"
GAME_MOVES = "frobozz.game.moves"
HANDOFF_STEP = "frobozz.handoff.step"  # compact, ask
HANDOFF_WINDOW = (
    "frobozz.handoff.window"  # the model's context window, in tokens (the step's context is CONTEXT_TOKENS)
)
HANDOFF_ID = "frobozz.handoff.id"
HANDOFF_NEXT_STEPS = "frobozz.handoff.next_steps"  # how many
HANDOFF_MEMORIES = "frobozz.handoff.memories"  # how many
HANDOFF_SUMMARY_CHARS = "frobozz.handoff.summary_chars"
ROUTINE = "frobozz.routine.name"
ROUTINE_KIND = "frobozz.routine.kind"  # cron, every, inbox, feed
ROUTINE_MANUAL = "frobozz.routine.manual"  # fired by `routine run`, not by its schedule or source
ROUTINE_STATE = "frobozz.routine.state"  # done, failed, skipped
ROUTINE_REASON = "frobozz.routine.reason"  # Frobozz's own words for how it ended (never the item's content)

# where a tool call's trace context waits for a Frobozz server that claude did not hand it to (see servers)
TRACE_PARENTS_ENV = "FROBOZZ_TRACE_PARENTS"
TOOL_USE_META = "claudecode/toolUseId"  # the key claude's MCP client puts each call's tool_use id under


_TRACER = trace.get_tracer(TRACER_NAME)  # a proxy until a provider is set, then that provider's tracer


def tracer() -> trace.Tracer:
    return _TRACER


def recording() -> bool:
    """Whether a tracer provider is configured (the SDK, by `--trace`): a cheap check before work that only
    a recorded span would use."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def inject(
    carrier: MutableMapping[str, Any] | None = None, span: Span | None = None, session_id: str | None = None
) -> dict[str, Any]:
    """The current trace context (or `span`'s) as W3C `traceparent`/`tracestate` entries of `carrier`, and
    `session_id` as W3C `baggage` (`session.id`), so a server in another process puts it on its spans."""
    out: dict[str, Any] = dict(carrier or {})
    ctx = trace.set_span_in_context(span) if span is not None else None
    if session_id:
        ctx = baggage.set_baggage(SESSION_ID, session_id, ctx)
    propagate.inject(out, context=ctx)
    return out


def session_of(context: otel_context.Context | None) -> str | None:
    """The session id a context's baggage carries (from another process: a short printable string, or None)."""
    value = baggage.get_baggage(SESSION_ID, context)
    return value if isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable() else None


def extract(carrier: Mapping[str, Any] | None) -> otel_context.Context:
    """The trace context a mapping carries (an empty context when it carries none, or garbage)."""
    return propagate.extract({k: v for k, v in (carrier or {}).items() if isinstance(v, str)})


def record_error(span: Span, error: BaseException | str) -> None:
    """An error on its span: an exception event (when there is one) and the span's status, so it is red."""
    if isinstance(error, BaseException):
        span.record_exception(error)
        span.set_attribute(ERROR_TYPE, type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR, str(error)[:500]))
    else:
        span.set_attribute(ERROR_TYPE, "error")
        span.set_status(Status(StatusCode.ERROR, error[:500]))


@contextmanager
def span(
    name: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: otel_context.Context | None = None,
) -> Iterator[Span]:
    """A span made current for the block; an exception escaping it is recorded on it (then raised on)."""
    with tracer().start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as e:
            if not isinstance(e, GeneratorExit):
                record_error(current, e)
            raise


def cut(text: str, limit: int, *, newest: bool = False) -> str:
    """Captured content cut to the size the user set: its start, or (`newest`, for a request's messages,
    which end with what is new) its end."""
    if len(text) <= limit:
        return text
    if newest:
        return f"[{len(text) - limit} earlier chars] …" + text[len(text) - limit :]
    return text[:limit] + f"… [{len(text) - limit} more chars]"
