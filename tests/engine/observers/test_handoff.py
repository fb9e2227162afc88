import json

import asyncpg
import pytest

from frobozz import _spans as S
from frobozz.engine import (
    AssistantMessage,
    CompactBoundary,
    Result,
    Session,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserMessage,
    is_compaction_request,
)
from frobozz.engine.observers import HandoffLetter, HandoffRelay
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from tests.conftest import hub_servers
from tests.engine.conftest import of, until
from tests.events import turn_end

pytestmark = pytest.mark.anyio

LETTER = {
    "summary": "Mapped the white house; the lamp is lit.",
    "next_steps": ["open the trap door"],
    "memories": ["The troll takes the sword only once."],
}


async def test_a_session_hands_off_compacts_and_the_next_window_opens_with_the_letter(
    make_options, frobozz_env, cortex_settings, spans
):
    def script(request):
        if is_compaction_request(request.body):
            return "The summary of the first window."
        if request.tool_results():
            return "Letter written."
        if request.last_user_text() == "wrap up":
            return Reply((ToolUse("mcp__handoff__handoff", LETTER),))
        return f"noted: {request.last_user_text()}"

    relay = HandoffRelay()
    async with ScriptedModel(script) as model:
        options = make_options(
            model,
            mcp_config=hub_servers(["handoff"], frobozz_env, cortex_settings),
            strict_mcp_config=True,
            allowed_tools=["mcp__handoff__handoff"],
        )
        async with Session(options, producers=[relay], observers=[relay]) as session:
            await session.wait_for_mcp({"handoff"})
            for text in ("tell me more", "wrap up"):  # claude compacts nothing shorter
                await session.send(text)
            events = await until(session.events(), Result, count=4, timeout=180)  # 2 turns, /compact, orientation
            await session.wait_idle()
    assert relay.letters == [HandoffLetter(LETTER["summary"], tuple(LETTER["next_steps"]), tuple(LETTER["memories"]))]
    results = [r for request in model.requests for r in request.tool_results()]
    assert results and "handoff_id" in json.dumps(results[0]) and not results[0].get("is_error")
    compaction = [n for n, r in enumerate(model.requests) if is_compaction_request(r.body)]
    assert len(compaction) == 1 and "open the trap door" in model.requests[compaction[0]].last_user_text()
    assert of(events, CompactBoundary)
    next_window = next(r for r in model.requests[compaction[0] + 1 :] if r.body.get("tools"))
    first_user = json.dumps(next_window.messages)
    assert "A new context window begins" in first_user and LETTER["summary"] in first_user
    assert "wrap up" not in first_user  # the old window is gone: only the summary and the orientation remain
    db = await asyncpg.connect(cortex_settings.database_url.get_secret_value())
    try:
        stored = await db.fetchrow("SELECT session_id, summary FROM handoffs")
    finally:
        await db.close()
    assert tuple(stored) == (session.session_id, LETTER["summary"])  # keyed by claude's own session id
    [step] = [s for s in spans.get_finished_spans() if s.name == S.HANDOFF]  # traced: the step, in its turn
    assert step.attributes[S.HANDOFF_STEP] == "compact" and step.attributes[S.HANDOFF_NEXT_STEPS] == 1
    [compacting] = [t for t in spans.get_finished_spans() if t.name == S.TURN and t.attributes[S.TURN_NUMBER] == 3]
    assert step.parent.span_id == compacting.context.span_id and LETTER["summary"] not in str(step.attributes)


async def test_past_the_threshold_the_model_is_asked_once_to_hand_off(make_options, spans):
    async with ScriptedModel(lambda request: Reply((Text("fine"),), input_tokens=160_000)) as model:
        relay = HandoffRelay(threshold=0.75, context_window=200_000)
        async with Session(make_options(model), producers=[relay], observers=[relay]) as session:
            await session.send("hello")
            events = await until(session.events(), Result, count=2)
            await session.send("and again")
            events += await until(session.events(), Result)
            await session.wait_idle()
    asks = [r.last_user_text() for r in model.requests if "Call the handoff tool now" in r.last_user_text()]
    assert len(asks) == 1 and "80% full" in asks[0]
    assert relay.context_used >= 0.8 and of(events, Usage)
    [step] = [s for s in spans.get_finished_spans() if s.name == S.HANDOFF]
    assert step.attributes[S.HANDOFF_STEP] == "ask" and step.attributes[S.CONTEXT_TOKENS] >= 160_000
    assert step.attributes[S.HANDOFF_WINDOW] == 200_000 and step.parent is not None


async def test_the_window_is_the_one_claude_reports_for_its_model(make_options):
    async with ScriptedModel(lambda request: Reply((Text("fine"),), input_tokens=160_000)) as model:
        relay = HandoffRelay(threshold=0.75)
        async with Session(make_options(model), producers=[relay], observers=[relay]) as session:
            await session.send("hello")
            [result] = of(await until(session.events(), Result), Result)
            await session.wait_idle()
    window = result.context_window
    assert window and relay.context_used == pytest.approx(160_000 / window, rel=0.05)
    asked = any("Call the handoff tool now" in r.last_user_text() for r in model.requests)
    assert asked == (160_000 >= 0.75 * window)  # claude 2.1.197's default model has a 1M window: no ask


def test_a_window_given_is_kept_and_otherwise_the_largest_reported_is_used():
    reported = turn_end(
        model_usage={"main": {"contextWindow": 1_000_000}, "side": {"contextWindow": 200_000}, "odd": "not a mapping"}
    )
    assert reported.context_window == 1_000_000 and turn_end().context_window is None
    learned, fixed = HandoffRelay(), HandoffRelay(context_window=200_000)
    for relay in (learned, fixed):
        relay.on_event(
            Usage(
                path="/v1/messages",
                status=200,
                model="m",
                input_tokens=160_000,
                output_tokens=10,
                cache_creation_input_tokens=0,
                cache_read_input_tokens=0,
                context_tokens=160_000,
                context_high_water=160_000,
                rate_limits={},
            )
        )
        relay.on_event(reported)
    assert learned.context_used == pytest.approx(0.16) and fixed.context_used == pytest.approx(0.8)


def test_a_letter_reads_from_any_tool_input():
    letter = HandoffLetter.from_input({"summary": "s", "next_steps": "one step", "memories": None})
    assert letter == HandoffLetter("s", ("one step",), ())
    assert "Next steps:\n- one step" in letter.text() and "Remember" not in letter.text()


def _turn(relay: HandoffRelay, *, refused: bool) -> None:
    relay.on_event(
        AssistantMessage(
            session_id="s",
            message_id="m",
            model=None,
            content=(ToolUseBlock(id="t1", name="mcp__handoff__handoff", input=LETTER),),
        )
    )
    relay.on_event(
        UserMessage(session_id="s", content=(ToolResultBlock(tool_use_id="t1", content="x", is_error=refused),))
    )
    relay.on_event(turn_end())


def test_a_letter_the_server_refused_is_not_relayed_and_replays_are_ignored():
    relay = HandoffRelay()
    _turn(relay, refused=True)
    relay.on_event(
        AssistantMessage(
            session_id="s",
            message_id="m",
            model=None,
            is_replay=True,
            content=(ToolUseBlock(id="t2", name="handoff", input=LETTER),),
        )
    )
    assert relay.letters == []
    _turn(relay, refused=False)
    assert [letter.summary for letter in relay.letters] == [LETTER["summary"]]


def test_mid_turn_the_ask_is_due_once_past_the_threshold_and_not_again_when_the_turn_ends():
    relay = HandoffRelay(context_window=200_000)
    assert relay.due() is None  # nothing measured yet
    relay.on_event(
        Usage(
            path="/v1/messages",
            status=200,
            model="m",
            input_tokens=170_000,
            output_tokens=10,
            cache_creation_input_tokens=0,
            cache_read_input_tokens=0,
            context_tokens=170_000,
            context_high_water=170_000,
            rate_limits={},
        )
    )
    step = relay.due()
    assert step is not None and step.letter is None and (step.used, step.window) == (170_000, 200_000)
    assert relay.due() is None
    relay.on_event(turn_end())
    assert relay.steps() == []  # asked already in this window
