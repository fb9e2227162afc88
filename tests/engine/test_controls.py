"""The rest of the official Agent SDK's controls and options, each through the real claude CLI against a
scripted Messages API: file checkpoints rewound, context usage, MCP servers toggled and reconnected,
tasks stopped, the server's info, a chosen session id, a resume cut at a message, plugins, skills,
the sandbox, effort, thinking, a task budget and hook events."""

import json
import sys
import uuid
from pathlib import Path

import pytest

from frobozz.engine import Engine, EngineOptions, Result, SystemMessage, UserMessage
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse, replies
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio
CALC = {"mcpServers": {"calc": {"command": sys.executable, "args": [str(Path(__file__).with_name("calc_server.py"))]}}}


async def test_a_rewind_puts_back_a_file_a_tool_wrote(make_options, claude_home):
    notes = claude_home / "notes.txt"
    notes.write_text("the lamp is lit\n")
    script = replies(
        Reply((ToolUse("Read", {"file_path": str(notes)}),)),  # (claude writes only what it has read)
        Reply((ToolUse("Write", {"file_path": str(notes), "content": "the lamp is out\n"}),)),
        "done",
    )
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model, file_checkpointing=True, allowed_tools=["Read", "Write"])) as engine:
            await engine.start()
            await engine.send("put the lamp out")
            events = await until(engine.events(), Result)
            assert notes.read_text() == "the lamp is out\n"
            asked = next(e for e in events if isinstance(e, UserMessage) and e.text == "put the lamp out")
            await engine.rewind_files(asked.uuid)
    assert notes.read_text() == "the lamp is lit\n"


async def test_context_usage_and_server_info_report_what_claude_has(make_options):
    async with ScriptedModel(replies("hello")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            info = engine.get_server_info()
            await engine.send("hi")
            await until(engine.events(), Result)
            usage = await engine.get_context_usage()
    assert usage.max_tokens > usage.total_tokens > 0 and 0 <= usage.percentage <= 100
    assert "System prompt" in dict(usage.categories) and usage.raw["totalTokens"] == usage.total_tokens
    assert info["commands"] and "models" in info and info is not engine.init_response  # a copy


async def test_a_toggled_mcp_server_disappears_and_comes_back_and_a_reconnect_keeps_it(make_options):
    add = Reply((ToolUse("mcp__calc__add", {"numbers": [2, 2]}),))
    async with ScriptedModel(replies(add, "four", add, "gone", add, "four again")) as model:
        async with Engine(
            make_options(model, mcp_config=CALC, strict_mcp_config=True, allowed_tools=["mcp__calc__add"])
        ) as engine:
            await engine.start()
            await engine.wait_for_mcp(["calc"])
            statuses, results = [], []
            for enabled in (True, False, True):
                if not enabled or statuses:
                    await engine.toggle_mcp_server("calc", enabled)
                statuses.append({s.name: s.status for s in await engine.mcp_status()})
                await engine.send("add two and two")
                events = await until(engine.events(), Result)
                results += [r for e in events if isinstance(e, UserMessage) for r in e.tool_results]
            await engine.reconnect_mcp_server("calc")
            after = await engine.wait_for_mcp(["calc"])
            await engine.stop_task("no-such-task")  # an unknown task: answered, nothing stopped, nothing hangs
    assert statuses == [{"calc": "connected"}, {"calc": "disabled"}, {"calc": "connected"}]
    assert [r.is_error for r in results] == [False, True, False]  # the tool went with its server, and came back
    assert '"total":4' in str(results[0].content).replace(" ", "") and after[0].status == "connected"


async def test_a_chosen_session_id_is_used_and_a_resume_can_stop_at_an_earlier_answer(make_options):
    chosen = str(uuid.uuid4())
    async with ScriptedModel(replies("first answer", "second answer", "from the first")) as model:
        async with Engine(make_options(model, session_id=chosen)) as engine:
            await engine.start()
            await engine.send("one")
            first = await until(engine.events(), Result)
            await engine.send("two")
            await until(engine.events(), Result)
        answer = next(e for e in first if type(e).__name__ == "AssistantMessage").raw["uuid"]
        async with Engine(make_options(model, resume_session_at=answer, fork_session=True)) as engine:
            await engine.start(chosen)
            await engine.send("three")
            await until(engine.events(), Result)
    assert first[-1].session_id == chosen
    history = str(model.requests[2].body["messages"])
    assert "first answer" in history and "second answer" not in history and "three" in history


async def test_plugins_skills_and_settings_hooks_reach_claude_and_their_events_come_back(make_options, claude_home):
    skill = claude_home / ".claude" / "skills" / "mapmaker"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: mapmaker\ndescription: Draws maps of the caves\n---\nDraw it.\n")
    plugin = claude_home / "lanterns"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "lanterns", "version": "1.0.0"}))
    (plugin / "commands").mkdir()
    (plugin / "commands" / "brighten.md").write_text("---\ndescription: Brighten the lamp\n---\nBrighten it.\n")
    hook = {"matcher": "Read", "hooks": [{"type": "command", "command": "echo looked"}]}
    (claude_home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [hook]}}))
    script = replies(Reply((ToolUse("Read", {"file_path": str(skill / "SKILL.md")}),)), "read")
    async with ScriptedModel(script) as model:
        options = make_options(
            model,
            skills=["mapmaker"],
            plugins=[plugin],
            include_hook_events=True,
            allowed_tools=["Read"],
            sandbox={"enabled": False},
        )
        async with Engine(options) as engine:
            await engine.start()
            commands = [c.get("name") for c in engine.get_server_info()["commands"]]
            await engine.send("look at the skill")
            events = await until(engine.events(), Result)
    assert "mapmaker" in commands and "lanterns:brighten" in commands
    assert "Draws maps of the caves" in json.dumps(model.requests[0].body)
    hooks = [e.raw for e in events if isinstance(e, SystemMessage) and e.subtype in ("hook_started", "hook_response")]
    assert [h["subtype"] for h in hooks] == ["hook_started", "hook_response"] and hooks[1]["stdout"] == "looked\n"
    assert "Skill(mapmaker)" in options.arguments()[options.arguments().index("--allowedTools") + 1]


async def test_effort_thinking_and_a_task_budget_reach_the_models_request(make_options):
    async with ScriptedModel(replies("thought about it")) as model:
        options = make_options(model, effort="high", thinking={"type": "adaptive"}, task_budget=50_000)
        async with Engine(options) as engine:
            await engine.start()
            await engine.send("think")
            await until(engine.events(), Result)
    body = model.requests[0].body
    assert body["thinking"]["type"] == "adaptive" and body["output_config"]["effort"] == "high"
    assert body["output_config"]["task_budget"]["total"] == 50_000


def test_bad_option_values_are_clear_errors_before_claude_starts():
    with pytest.raises(ValueError, match="not a skill name"):
        EngineOptions(skills=["../../etc"]).arguments()
    with pytest.raises(ValueError, match="budget_tokens"):
        EngineOptions(thinking={"type": "enabled"}).arguments()
    args = EngineOptions(
        thinking={"type": "enabled", "budget_tokens": 4000}, sandbox={"enabled": True}, session_id="x"
    ).arguments(resume="abc")
    assert "--max-thinking-tokens" in args and json.loads(args[args.index("--settings") + 1]) == {
        "sandbox": {"enabled": True}
    }
    assert "--session-id=x" not in args  # a resumed session keeps its own id
