"""The engine's spans, with the real CLI against the scripted Messages API: a session span, one trace per
turn, a span per model request (GenAI conventions) and per tool call; errors red; no text unless asked."""

from __future__ import annotations

import json
from dataclasses import replace

import anyio
import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price
from opentelemetry.trace import SpanKind, StatusCode

from frobozz import _spans as S
from frobozz.engine import Engine, EngineSettings, Result, Session, WarmSpare
from frobozz.engine.testing import ApiError, Reply, ScriptedModel, Text, ToolUse, replies
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio
SECRET_TEXT = "the brass lantern glows"


def _by_name(finished, prefix):
    return [s for s in finished if s.name.startswith(prefix)]


def _all_text(finished) -> str:
    return json.dumps(
        [{**dict(s.attributes or {}), "events": [dict(e.attributes or {}) for e in s.events]} for s in finished],
        default=str,
    )


async def test_each_turn_is_a_trace_of_its_own_with_its_model_requests_and_tool_calls(make_options, claude_home, spans):
    notes = claude_home / "notes.md"
    notes.write_text(f"{SECRET_TEXT}\n")
    script = replies(
        Reply((ToolUse("Read", {"file_path": str(notes)}),), input_tokens=1234, output_tokens=56),
        Reply((Text(f"It says: {SECRET_TEXT}"),), input_tokens=1500, output_tokens=9),
        "second answer",
    )
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model, trace_attributes={S.SESSION_KIND: "test"})) as engine:
            await engine.start()
            for text in (f"read notes.md: {SECRET_TEXT}", "and again"):
                await engine.send(text)
                await until(engine.events(), Result)
            session_id = engine.session_id
    finished = spans.get_finished_spans()
    [session] = _by_name(finished, S.SESSION)
    turns = _by_name(finished, S.TURN)
    assert [t.attributes[S.TURN_NUMBER] for t in turns] == [1, 2]
    assert len({t.context.trace_id for t in turns} | {session.context.trace_id}) == 3  # a trace each
    assert all(t.parent is None and t.links[0].context.span_id == session.context.span_id for t in turns)
    assert session.attributes[S.SESSION_ID] == session_id and session.attributes[S.SESSION_KIND] == "test"
    assert all(t.attributes[S.SESSION_ID] == session_id for t in turns)
    assert all(t.attributes[S.TURN_OUTCOME] == "result" and S.COST_USD in t.attributes for t in turns)

    first = turns[0].context.trace_id
    chats = [
        s
        for s in _by_name(finished, S.CHAT)
        if s.context.trace_id == first and s.attributes.get(S.GEN_AI_INPUT_TOKENS) in (1234, 1500)
    ]
    assert [c.attributes[S.GEN_AI_INPUT_TOKENS] for c in chats] == [1234, 1500]
    tool_call, answer = chats
    assert tool_call.kind is SpanKind.CLIENT and tool_call.parent.span_id == turns[0].context.span_id
    assert tool_call.attributes[S.GEN_AI_OUTPUT_TOKENS] == 56
    assert tool_call.attributes[S.GEN_AI_FINISH_REASONS] == ("tool_use",)
    assert answer.attributes[S.GEN_AI_FINISH_REASONS] == ("end_turn",)
    assert tool_call.attributes[S.GEN_AI_OPERATION] == "chat" and tool_call.attributes[S.GEN_AI_PROVIDER] == "anthropic"
    assert tool_call.attributes[S.GEN_AI_RESPONSE_ID] and tool_call.attributes[S.TIME_TO_FIRST_TOKEN_MS] >= 0
    model = tool_call.attributes[S.GEN_AI_RESPONSE_MODEL]
    # the request's model and max_tokens, read from the head and tail of claude's body, not its whole history
    assert tool_call.attributes[S.GEN_AI_REQUEST_MODEL] == model and tool_call.name == f"{S.CHAT} {model}"
    assert tool_call.attributes[S.GEN_AI_REQUEST_MAX_TOKENS] > 0
    assert tool_call.attributes[S.GEN_AI_COST] == pytest.approx(
        float(
            calc_price(  # each request's cost, at list price
                PriceUsage(input_tokens=1234, output_tokens=56), model, provider_id="anthropic"
            ).total_price
        )
    )
    assert 0 < tool_call.attributes[S.GEN_AI_COST] < answer.attributes[S.GEN_AI_COST]

    [read] = _by_name(finished, f"{S.EXECUTE_TOOL} Read")
    assert read.parent.span_id == turns[0].context.span_id and read.context.trace_id == first
    assert read.attributes[S.TOOL_TARGET] == "notes.md" and read.attributes[S.TOOL_OUTCOME] == "ok"
    assert read.attributes[S.TOOL_OUTPUT_CHARS] > 0 and read.attributes[S.GEN_AI_TOOL_CALL_ID].startswith("toolu_")
    assert tool_call.start_time < read.start_time < read.end_time <= turns[0].end_time

    assert SECRET_TEXT not in _all_text(finished)  # content capture is off by default


def test_a_request_s_cost_counts_cached_tokens_at_their_own_price_and_an_unknown_model_has_none():
    from frobozz.engine._tracing import request_cost

    plain = request_cost("claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 100})
    cached = request_cost(
        "claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 5000}
    )
    assert plain is not None and cached is not None and plain < cached < plain + 5000 * 3e-6  # reads cost less
    assert request_cost("a-model-nobody-sells", {"input_tokens": 10}) is None
    assert request_cost(None, {"input_tokens": 10}) is None


async def test_with_content_capture_on_prompts_and_completions_are_kept_cut_to_size(make_options, spans):
    long_answer = "x" * 500
    async with ScriptedModel(replies(long_answer)) as model:
        async with Engine(make_options(model), EngineSettings(trace_content=True, trace_content_max=100)) as engine:
            await engine.start()
            await engine.send(f"say {SECRET_TEXT}")
            await until(engine.events(), Result)
    finished = spans.get_finished_spans()
    [turn] = _by_name(finished, S.TURN)
    assert SECRET_TEXT in turn.attributes[S.GEN_AI_INPUT_MESSAGES]
    answered = [c for c in _by_name(finished, S.CHAT) if "x" * 10 in c.attributes.get(S.GEN_AI_OUTPUT_MESSAGES, "")]
    assert answered and all(len(c.attributes[S.GEN_AI_OUTPUT_MESSAGES]) < 140 for c in answered)
    assert "400 more chars" in answered[0].attributes[S.GEN_AI_OUTPUT_MESSAGES]
    requests = [c.attributes[S.GEN_AI_INPUT_MESSAGES] for c in _by_name(finished, S.CHAT)]
    assert requests and all(len(r) < 140 and r.startswith("[") for r in requests)  # their newest end, cut


async def test_a_failed_model_request_and_its_turn_are_red(make_options, spans):
    async with ScriptedModel(replies(ApiError(status=500, message="the model is down"))) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("hello")
            await until(engine.events(), Result)
    finished = spans.get_finished_spans()
    failed = [c for c in _by_name(finished, S.CHAT) if c.attributes.get(S.HTTP_STATUS) == 500]
    assert failed and failed[0].status.status_code is StatusCode.ERROR
    [turn] = _by_name(finished, S.TURN)
    assert turn.status.status_code is StatusCode.ERROR and turn.attributes[S.TURN_OUTCOME] == "error"


async def test_with_tracing_off_nothing_is_made_and_claude_is_told_nothing(make_options):
    async with ScriptedModel(replies("hi")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("hello")
            await until(engine.events(), Result)
            assert not engine.trace.on and engine.trace.session is None
            assert S.TRACE_PARENTS_ENV not in engine.env


async def test_a_denied_call_and_a_failed_one_are_red_with_their_outcome(make_options, claude_home, spans):
    from frobozz.engine import Allow, Deny

    outside = claude_home.parent / "elsewhere" / "escape.md"

    async def guard(name, tool_input, context):
        return Deny("outside the workspace") if name == "Write" else Allow()

    script = replies(
        Reply((ToolUse("Write", {"file_path": str(outside), "content": "x" * 40}),)),
        Reply((ToolUse("Read", {"file_path": str(claude_home / "missing.md")}),)),
        "done",
    )
    async with ScriptedModel(script) as model:
        async with Session(make_options(model, can_use_tool=guard)) as session:
            await session.send("write it")
            await until(session.events(), Result)
    finished = spans.get_finished_spans()
    [write] = _by_name(finished, f"{S.EXECUTE_TOOL} Write")
    [read] = _by_name(finished, f"{S.EXECUTE_TOOL} Read")
    assert write.attributes[S.TOOL_OUTCOME] == "denied" and write.status.status_code is StatusCode.ERROR
    assert read.attributes[S.TOOL_OUTCOME] == "error" and read.status.status_code is StatusCode.ERROR
    assert S.TOOL_ERROR not in read.attributes  # the error's text is content: off by default
    assert not outside.exists()
    asked = {s.attributes[S.GEN_AI_TOOL_NAME]: s for s in _by_name(finished, S.PERMISSION)}
    assert asked["Write"].attributes[S.PERMISSION_DECISION] == "deny"  # its length: the time the answer took
    assert asked["Write"].parent.span_id == write.context.span_id  # under the call it was asked for


async def test_a_compaction_is_an_event_on_its_turn_and_its_rewritten_request_says_so(make_options, spans):
    from frobozz.engine import is_compaction_request

    def script(request):
        return "SUMMARY" if is_compaction_request(request.body) else "an answer"

    async with ScriptedModel(script) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            engine.set_compaction_rewrite(lambda body: body)
            for text in ("hello", "tell me more", "and more", "/compact"):
                await engine.send(text)
                await until(engine.events(), Result)
    finished = spans.get_finished_spans()
    compacted = [t for t in _by_name(finished, S.TURN) if any(e.name == S.COMPACTION for e in t.events)]
    assert [t.attributes[S.TURN_NUMBER] for t in compacted] == [4]
    assert any(
        c.attributes.get(S.MODEL_REWRITTEN)
        for c in _by_name(finished, S.CHAT)
        if c.context.trace_id == compacted[0].context.trace_id
    )


async def test_a_session_taking_a_warm_spare_over_is_traced_from_there_linked_to_its_taker_s_work_alone(
    make_options, spans
):
    """The spare's session span opened when the spare started (linked to whatever work primed it, with the
    spare's attributes), and its rehearsed turns (its first turn answered by the engine, then `/clear`) were
    traced and counted as the session's: the taker's first turn was turn 3. A spare never taken traces nothing."""
    async with ScriptedModel(lambda r: f"You said: {r.last_user_text()}") as model:
        options = make_options(model)
        async with WarmSpare() as spare:
            with S.tracer().start_as_current_span("primer"):
                spare.prime(options)
            with anyio.fail_after(120):
                await spare.wait_ready()
            with S.tracer().start_as_current_span("taker") as taker:
                traced = replace(options, trace_attributes={S.SESSION_KIND: "test"})
                async with Session(traced, spare=spare) as session:
                    await session.send("hello")
                    with anyio.fail_after(120):
                        await until(session.events(), Result)
                    with anyio.fail_after(120):
                        await spare.wait_ready()  # the next spare, started during this work, never taken
                    session_id = session.engine.session_id
            assert spare.taken == 1
    finished = spans.get_finished_spans()
    [session] = _by_name(finished, S.SESSION)
    assert session.attributes[S.SESSION_KIND] == "test" and session.attributes[S.SESSION_ID] == session_id
    assert [link.context.span_id for link in session.links] == [taker.get_span_context().span_id]
    [turn] = _by_name(finished, S.TURN)
    assert turn.attributes[S.TURN_NUMBER] == 1 and turn.attributes[S.SESSION_KIND] == "test"
    assert [link.context.span_id for link in turn.links] == [session.context.span_id]
    assert session.attributes[S.NUM_TURNS] == 1
    assert all(c.context.trace_id == turn.context.trace_id for c in _by_name(finished, S.CHAT))
