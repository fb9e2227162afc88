"""The Engine against the real claude CLI, talking to a scripted Messages API on 127.0.0.1."""

import os
import stat

import anyio
import pytest

from frobozz.engine import (
    Allow,
    AssistantMessage,
    CLINotFoundError,
    Deny,
    Engine,
    EngineOptions,
    EngineState,
    ErrorEvent,
    ProcessError,
    ProcessExit,
    Restarted,
    Result,
    StreamEvent,
    SystemInit,
    UserMessage,
    transcript_path,
)
from frobozz.engine.testing import ApiError, Reply, ScriptedModel, Text, ToolUse, replies
from tests.engine.conftest import of, until, wait_for_file
from tests.orphans import claudes_below
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_text_replies_come_back_as_typed_events_with_the_session_id(make_options):
    async with ScriptedModel(replies("Hello there.", "Again.")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("hi")
            first = await until(engine.events(), Result)
            await engine.send([{"type": "text", "text": "once more"}])
            second = await until(engine.events(), Result)
    init = of(first, SystemInit)[0]
    assert init.session_id and engine.session_id == init.session_id
    assert [m.text for m in of(first + second, AssistantMessage)] == ["Hello there.", "Again."]
    results = of(first + second, Result)
    assert [r.result for r in results] == ["Hello there.", "Again."] and not results[0].is_error
    assert model.requests[1].last_user_text() == "once more"
    assert engine.state is EngineState.CLOSED


async def test_partial_messages_stream_text_deltas(make_options):
    async with ScriptedModel(replies("a fairly long answer that arrives in several pieces")) as model:
        async with Engine(make_options(model, include_partial_messages=True)) as engine:
            await engine.start()
            await engine.send("hi")
            events = await until(engine.events(), Result)
    deltas = "".join(e.text_delta for e in of(events, StreamEvent))
    assert deltas == "a fairly long answer that arrives in several pieces"


@pytest.mark.parametrize("status", [429, 500, 529])
async def test_an_api_error_surfaces_as_an_error_event(make_options, status):
    async with ScriptedModel(replies(ApiError(status, "api_error", "scripted trouble"), "recovered")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("hi")
            events = await until(engine.events(), Result)
            await engine.send("again")
            after = await until(engine.events(), Result)
    error = of(events, ErrorEvent)[0]
    assert (error.source, error.status) == ("api", status) and "scripted trouble" in error.message
    assert of(events, Result)[0].is_error and of(events, Result)[0].api_error_status == status
    assert events.index(error) < events.index(of(events, Result)[0])  # seen before the turn ends
    assert of(after, Result)[0].result == "recovered"  # the session goes on


async def test_a_permission_request_is_answered_by_the_callback(make_options, claude_home):
    asked = []

    async def can_use_tool(name, tool_input, context):
        asked.append((name, dict(tool_input), context.tool_use_id))
        return Deny("writing files is not allowed here")

    target = claude_home / "x.txt"
    script = replies(Reply((ToolUse("Write", {"file_path": str(target), "content": "hi"}, id="toolu_w1"),)), "ok")
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model, can_use_tool=can_use_tool)) as engine:
            await engine.start()
            await engine.send("write a file")
            events = await until(engine.events(), Result)
    assert asked == [("Write", {"file_path": str(target), "content": "hi"}, "toolu_w1")]
    result = of(events, UserMessage)[0].tool_results[0]
    assert result.is_error and "writing files is not allowed here" in str(result.content)
    assert not target.exists()
    assert "writing files is not allowed here" in str(model.requests[1].tool_results()[0]["content"])


async def test_an_allowing_callback_can_change_the_tool_input(make_options, claude_home):
    async def can_use_tool(name, tool_input, context):
        return Allow(updated_input={**tool_input, "content": "changed by the callback"})

    target = claude_home / "y.txt"
    script = replies(Reply((ToolUse("Write", {"file_path": str(target), "content": "original"}),)), "ok")
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model, can_use_tool=can_use_tool)) as engine:
            await engine.start()
            await engine.send("write")
            await until(engine.events(), Result)
    assert target.read_text() == "changed by the callback"


async def test_interrupt_ends_the_turn_and_the_next_one_works(make_options):
    slow = Reply((Text("word " * 400),), delay=0.05)
    async with ScriptedModel(lambda request: "after" if "next" in request.last_user_text() else slow) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("talk for a long time")
            with anyio.fail_after(30):
                await eventually(lambda: model.requests, interval=0.01)  # interrupt once the model is answering
            await engine.interrupt()
            events = await until(engine.events(), Result, timeout=10)
            await engine.send("next")
            after = await until(engine.events(), Result)
    assert of(events, Result)[0].subtype == "error_during_execution"
    assert of(after, AssistantMessage)[-1].text == "after"
    assert of(after, Result)[-1].result == "after"


async def test_a_cli_killed_mid_turn_is_restarted_on_the_same_session(make_options):
    slow = Reply((Text("slow " * 100),), delay=0.05)
    async with ScriptedModel(replies("first", slow, "answered after the restart")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("one")
            await until(engine.events(), Result)
            session_id, pid = engine.session_id, engine.pid
            await engine.send("two")
            await until(engine.events(), SystemInit)
            await wait_for_file(transcript_path(session_id, engine.cwd, engine.env))  # written lazily by claude
            engine.kill()
            events = await until(engine.events(), Restarted)
            assert engine.pid != pid and engine.state is EngineState.RUNNING
            await engine.send("two, again")
            after = await until(engine.events(), Result)
    exit_event = of(events, ProcessExit)[0]
    assert not exit_event.expected and exit_event.exit_code != 0
    restarted = of(events, Restarted)[0]
    assert (restarted.session_id, restarted.attempt, restarted.resumed) == (session_id, 1, True)
    assert of(after, Result)[0].session_id == session_id
    assert any(m.get("content") == "one" or "one" in str(m.get("content")) for m in model.requests[-1].messages)


async def test_a_crash_before_claude_wrote_its_transcript_restarts_as_a_new_session(make_options):
    async with ScriptedModel(replies("first", "second")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            await engine.send("one")
            await until(engine.events(), Result)
            old_session = engine.session_id
            if transcript_path(old_session, engine.cwd, engine.env).exists():
                pytest.skip("claude wrote its transcript at once this time")
            engine.kill()
            events = await until(engine.events(), Restarted)
            await engine.send("two")
            after = await until(engine.events(), Result)
    assert of(events, Restarted)[0].resumed is False
    assert of(after, Result)[0].result == "second" and engine.session_id != old_session


async def test_garbage_on_stdout_becomes_error_events_and_the_stream_goes_on(make_options, tmp_path):
    real = (await anyio.to_thread.run_sync(lambda: EngineOptions().cli_path)) or None
    from frobozz.engine import find_claude

    wrapper = tmp_path / "noisy-claude"
    wrapper.write_text(
        f"#!/bin/sh\necho 'Welcome! this is not JSON'\necho '[1, 2, 3]'\nexec {find_claude(real)} \"$@\"\n"
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    async with ScriptedModel(replies("fine")) as model:
        async with Engine(make_options(model, cli_path=wrapper)) as engine:
            await engine.start()
            await engine.send("hi")
            events = await until(engine.events(), Result)
    errors = of(events, ErrorEvent)
    assert [e.source for e in errors] == ["stdout", "stdout"]
    assert "Welcome! this is not JSON" in errors[0].message and "[1, 2, 3]" in errors[1].message
    assert of(events, AssistantMessage)[0].text == "fine"


async def test_closing_ends_claude_cleanly_and_reports_an_expected_exit(make_options):
    async with ScriptedModel(replies("x")) as model:
        engine = Engine(make_options(model))
        async with engine:
            await engine.start()
            pid = engine.pid
        events = [e async for e in engine.events()]
    exit_event = of(events, ProcessExit)[-1]
    assert exit_event.expected and exit_event.exit_code == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_claudecode_is_removed_from_the_childs_environment(make_options, monkeypatch):
    monkeypatch.setenv("CLAUDECODE", "1")
    async with ScriptedModel(replies("x")) as model:
        engine = Engine(make_options(model))
    assert "CLAUDECODE" not in engine.env and engine.env["HOME"]


async def test_a_missing_cli_is_a_clear_error(make_options, tmp_path):
    async with ScriptedModel(replies("x")) as model:
        async with Engine(make_options(model, cli_path=tmp_path / "no-claude-here")) as engine:
            with pytest.raises(CLINotFoundError, match="no claude executable"):
                await engine.start()


async def test_a_claude_that_exits_as_it_starts_on_a_half_written_config_is_started_again(
    make_options, claude_home, caplog
):
    """claude writes its config file in place (anthropics/claude-code#65335): a start beside another in the same
    HOME can read it half-written and exit 1. Here the file is cut short, and made whole once claude says so."""
    config = claude_home / ".claude.json"
    config.write_text('{"numStartups": 3, "projects": {')
    said: list[str] = []

    def stderr(line: str) -> None:
        said.append(line)
        if "Configuration error" in line:
            config.unlink(missing_ok=True)  # the other writer is done (here: none had written it yet)

    async with ScriptedModel(replies("Started the second time.")) as model:
        async with Engine(make_options(model, stderr=stderr)) as engine:
            await engine.start()
            await engine.send("hi")
            events = await until(engine.events(), Result)
    assert of(events, Result)[0].result == "Started the second time." and engine.restarts == 0
    assert sum("Configuration error" in line for line in said) == 1
    [warning] = [r.getMessage() for r in caplog.records if "exited as it started" in r.getMessage()]
    assert "attempt 1" in warning and "Configuration error" in warning  # why, from its stderr
    assert not of(events, ProcessExit)  # a start that was tried again is not an exit of the session


async def test_a_claude_that_cannot_start_is_tried_max_restarts_times_more_and_leaves_no_process(
    make_options, claude_home
):
    (claude_home / ".claude.json").write_text('{"numStartups": ')  # cut short for good
    starts: list[str] = []
    async with ScriptedModel(replies("never")) as model:
        async with Engine(make_options(model, max_restarts=1, stderr=starts.append)) as engine:
            with pytest.raises(ProcessError, match=r"claude did not start: .*Configuration error"):
                await engine.start()
        assert not model.requests
    assert sum("Configuration error" in line for line in starts) == 2
    assert not claudes_below(os.getpid())


async def test_a_claude_restarting_when_its_engine_closes_does_not_outlive_the_engine(make_options):
    """The crash's restart and the close race: whichever claude is up by then is stopped with its engine."""
    async with ScriptedModel(replies("first")) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            engine.kill()
            await until(engine.events(), ProcessExit)  # its restart begins as the engine closes
        assert not claudes_below(os.getpid())
