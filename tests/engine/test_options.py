"""The options users of the official Agent SDK expect, each a typed field of EngineOptions, through the real
claude CLI against a scripted Messages API: structured output typed, max_turns, fork_session and continue,
custom agents, and claude's stderr line by line."""

import anyio
import pytest
from pydantic import BaseModel

from frobozz.engine import Engine, EngineOptions, ProcessError, Result
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse, replies
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio


class Where(BaseModel):
    room: str
    score: int


def test_each_option_becomes_its_flag_and_nothing_is_sent_for_options_left_alone(tmp_path):
    assert EngineOptions().arguments() == [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    args = EngineOptions(
        output_schema=Where,
        max_turns=3,
        max_budget_usd=0.5,
        fallback_model="claude-haiku",
        max_thinking_tokens=2048,
        add_dirs=[tmp_path, "/srv"],
        setting_sources=[],
        fork_session=True,
    ).arguments(resume="abc")
    joined = " ".join(args)
    assert '"room"' in args[args.index("--json-schema") + 1] and "--max-turns 3" in joined
    assert "--max-budget-usd 0.5" in joined and "--fallback-model claude-haiku" in joined
    assert "--max-thinking-tokens 2048" in joined and f"--add-dir {tmp_path} --add-dir /srv" in joined
    assert "--setting-sources=" in args and "--resume=abc" in args and args[-1] == "--fork-session"
    assert "--fork-session" not in EngineOptions(fork_session=True).arguments()  # nothing to fork from
    assert EngineOptions(continue_conversation=True).arguments()[-1] == "--continue"


@pytest.mark.parametrize("schema", [Where, Where.model_json_schema()])
async def test_structured_output_comes_back_in_the_shape_asked_for(make_options, schema):
    script = replies(Reply((ToolUse("StructuredOutput", {"room": "Kitchen", "score": 10}),)), "done")
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model, output_schema=schema)) as engine:
            await engine.start()
            await engine.send("where are we, and what is the score?")
            result = (await until(engine.events(), Result))[-1]
    assert "StructuredOutput" in model.requests[0].tools
    expected = Where(room="Kitchen", score=10)
    assert result.structured == (expected if schema is Where else expected.model_dump())


async def test_max_turns_stops_a_model_that_would_go_on_calling_tools(make_options, claude_home):
    (claude_home / "notes.txt").write_text("look again\n")
    reads = [Reply((ToolUse("Read", {"file_path": str(claude_home / "notes.txt")}),))] * 5
    async with ScriptedModel(replies(*reads, "done")) as model:
        async with Engine(make_options(model, max_turns=2, allowed_tools=["Read"])) as engine:
            await engine.start()
            await engine.send("read it until you are sure")
            result = (await until(engine.events(), Result))[-1]
    assert result.subtype == "error_max_turns" and len(model.requests) == 2


async def test_fork_session_goes_on_under_a_new_id_with_the_history_and_continue_takes_up_the_latest(make_options):
    async with ScriptedModel(replies("the lamp is in the attic", "yes, the attic", "still the attic")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("where is the lamp?")
            first = (await until(engine.events(), Result))[-1].session_id
        async with Engine(make_options(model, fork_session=True)) as engine:
            await engine.start(first)
            await engine.send("remind me where")
            forked = (await until(engine.events(), Result))[-1].session_id
        async with Engine(make_options(model, continue_conversation=True)) as engine:
            await engine.start()
            await engine.send("and now?")
            continued = (await until(engine.events(), Result))[-1].session_id
    assert forked != first and "where is the lamp?" in str(model.requests[1].body["messages"])
    assert continued == forked and "remind me where" in str(model.requests[2].body["messages"])


async def test_custom_agents_are_offered_to_the_model(make_options):
    agents = {"cartographer": {"description": "Draws maps of the caves", "prompt": "You draw maps."}}
    async with ScriptedModel(replies("ok")) as model:
        async with Engine(make_options(model, agents=agents)) as engine:
            await engine.start()
            await engine.send("hi")
            await until(engine.events(), Result)
    assert "cartographer: Draws maps of the caves" in str(model.requests[0].body)  # among the agent types


async def test_claudes_stderr_reaches_the_callback_line_by_line_even_when_it_cannot_start(make_options):
    lines = []
    async with ScriptedModel(replies("ok")) as model:
        async with Engine(make_options(model, stderr=lines.append, extra_args=["--no-such-flag"])) as engine:
            with anyio.fail_after(60), pytest.raises(ProcessError):
                await engine.start()
    assert any("--no-such-flag" in line for line in lines) and all("\n" not in line for line in lines)
