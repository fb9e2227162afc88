"""The duplex Session against the real claude CLI: producers, observers, replay and resume."""

import json
import os
import sys

import anyio
import pytest

from frobozz.engine import (
    AssistantMessage,
    ErrorEvent,
    Event,
    McpServerError,
    Restarted,
    Result,
    Session,
    SystemInit,
    UserMessage,
    list_sessions,
)
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from tests.engine.conftest import of, send_and_kill_mid_turn, until, wait_for_file
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def echo(request):
    return f"echo: {request.last_user_text()}"


class Recorder:
    def __init__(self):
        self.events: list[Event] = []

    def on_event(self, event):
        self.events.append(event)


class Sender:
    def __init__(self, name, count):
        self.name, self.count = name, count

    async def run(self, session):
        for i in range(self.count):
            await session.send(f"{self.name} {i}")


async def test_two_producers_sending_at_once_each_get_their_turn_in_order(make_options):
    recorder = Recorder()
    async with ScriptedModel(echo) as model:
        async with Session(
            make_options(model), producers=[Sender("alice", 3), Sender("bob", 3)], observers=[recorder]
        ) as session:
            await until(session.events(), Result, count=6)
            await session.wait_idle()
    answers = [e.text for e in of(recorder.events, AssistantMessage)]
    assert sorted(answers) == sorted([f"echo: {who} {i}" for who in ("alice", "bob") for i in range(3)])
    assert [a for a in answers if "alice" in a] == [f"echo: alice {i}" for i in range(3)]  # each in its order
    assert len(model.requests) == 6  # one turn at a time: no message was merged into another


async def test_a_failing_or_slow_observer_never_stops_the_stream_or_the_others(make_options):
    class Failing:
        def on_event(self, event):
            raise RuntimeError("observer bug")

    class Slow:
        async def on_event(self, event):
            await anyio.sleep(3600)

    recorder = Recorder()
    async with ScriptedModel(echo) as model:
        async with Session(make_options(model), observers=[Failing(), Slow(), recorder]) as session:
            await session.send("one")
            await session.send("two")
            events = await until(session.events(), Result, count=2)
    assert [e.text for e in of(recorder.events, AssistantMessage)] == ["echo: one", "echo: two"]
    errors = [e for e in of(events, ErrorEvent) if e.source == "observer:Failing"]
    assert errors and "observer bug" in errors[0].message


async def test_a_failing_producer_is_reported_and_the_session_goes_on(make_options):
    class Broken:
        async def run(self, session):
            raise ValueError("producer bug")

    async with ScriptedModel(echo) as model:
        async with Session(make_options(model), producers=[Broken()]) as session:
            await session.send("still here")
            events = await until(session.events(), Result)
    assert any(e.source == "producer:Broken" and "producer bug" in e.message for e in of(events, ErrorEvent))
    assert of(events, AssistantMessage)[0].text == "echo: still here"


async def test_cancelling_the_consumer_leaves_no_claude_process_behind(make_options):
    slow = Reply((Text("x " * 500),), delay=0.05)
    async with ScriptedModel(lambda r: slow) as model:
        pid = None
        with anyio.move_on_after(30) as scope:
            async with Session(make_options(model)) as session:
                pid = session.engine.pid
                await session.send("talk")
                await until(session.events(), SystemInit)
                scope.cancel()
                await anyio.sleep(3600)
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_resumed_session_replays_its_history_then_continues_with_it(make_options, claude_home):
    async with ScriptedModel(echo) as model:
        async with Session(make_options(model)) as first:
            await first.send("remember the word xyzzy")
            await until(first.events(), Result)
            session_id = first.session_id
        options = make_options(model)
        await wait_for_file(claude_home / ".claude" / "projects")
        with anyio.fail_after(10):
            await eventually(lambda: list_sessions(options.cwd, options.env), interval=0.02)
        async with Session(options, resume=session_id) as second:
            await second.send("what was the word?")
            seen = await until(second.events(), Result)
    replayed = [e for e in seen if e.is_replay]
    events = [e for e in seen if not e.is_replay]
    assert seen[: len(replayed)] == replayed  # history first, then the live stream
    assert [type(e).__name__ for e in replayed] == ["UserMessage", "AssistantMessage"]
    assert replayed[0].text == "remember the word xyzzy" and replayed[1].text == "echo: remember the word xyzzy"
    assert of(events, Result)[0].session_id == session_id
    history = json.dumps(model.requests[-1].messages)
    assert "remember the word xyzzy" in history and "what was the word?" in history
    info = list_sessions(options.cwd, options.env)
    assert info[0].session_id == session_id and info[0].preview == "remember the word xyzzy"
    assert info[0].created and info[0].last_activity >= info[0].created


async def test_claude_calls_tools_of_a_real_mcp_server_from_the_mcp_config(make_options, frobozz_env):
    def script(request):
        results = request.tool_results()
        if request.last_user_text() == "thanks":
            return "you are welcome"
        if not results:
            return Reply((Text("Starting a game."), ToolUse("mcp__game__new_game", {"game": "zork1"})))
        payload = (
            json.loads(results[0]["content"][0]["text"])
            if isinstance(results[0]["content"], list)
            else json.loads(results[0]["content"])
        )
        if "session_id" in payload and payload.get("moves") == 0:
            return Reply((ToolUse("mcp__game__act", {"session_id": payload["session_id"], "command": "open mailbox"}),))
        return f"The game says: {payload['text']}"

    config = {
        "mcpServers": {
            "game": {
                "command": sys.executable,
                "args": ["-m", "frobozz", "serve", "game"],
                "env": {"FROBOZZ_DATA_DIR": str(frobozz_env), "FROBOZZ_GAMES_DIR": os.environ["FROBOZZ_GAMES_DIR"]},
            }
        }
    }
    async with ScriptedModel(script) as model:
        options = make_options(
            model, mcp_config=config, strict_mcp_config=True, allowed_tools=["mcp__game__new_game", "mcp__game__act"]
        )
        async with Session(options) as session:
            [game] = await session.wait_for_mcp({"game"})
            await session.send("play zork")
            events = await until(session.events(), Result)
            await session.send("thanks")
            later = await until(session.events(), Result)
    assert (game.name, game.status) == ("game", "connected") and "act" in game.tools
    init = of(later, SystemInit)[0]
    assert [(s.name, s.status) for s in init.mcp_servers] == [("game", "connected")]
    assert "mcp__game__act" in init.tools
    results = [r for u in of(events, UserMessage) for r in u.tool_results]
    assert len(results) == 2 and not any(r.is_error for r in results)
    assert "leaflet" in of(events, Result)[0].result


async def test_waiting_for_mcp_servers_names_each_that_failed_is_missing_or_is_still_starting(
    make_options, frobozz_env
):
    config = {
        "mcpServers": {
            "game": {"command": sys.executable, "args": ["-m", "frobozz", "serve", "game"]},
            "broken": {"command": str(frobozz_env / "no-such-server"), "args": []},
            "silent": {"command": "sleep", "args": ["600"]},
        }
    }  # never answers MCP's initialize: pending
    async with ScriptedModel(lambda request: "ok") as model:
        async with Session(make_options(model, mcp_config=config, strict_mcp_config=True)) as session:
            [game] = await session.wait_for_mcp({"game"})
            with pytest.raises(McpServerError) as failed:
                await session.wait_for_mcp({"game", "broken", "telepathy"})
            with pytest.raises(McpServerError, match=r"after 0.5 s: silent: pending"):
                await session.wait_for_mcp({"silent"}, timeout=0.5)
    assert game.status == "connected" and "new_game" in game.tools
    message = str(failed.value)
    assert "broken: failed" in message and "no-such-server" in message and "telepathy: not in the MCP config" in message
    assert "game" not in message


async def test_a_message_in_flight_when_claude_dies_is_sent_again_after_the_restart(make_options):
    slow = Reply((Text("slow " * 200),), delay=0.05)
    calls = []

    def script(request):
        calls.append(request.last_user_text())
        return slow if len(calls) == 2 else f"echo: {request.last_user_text()}"

    async with ScriptedModel(script) as model:
        async with Session(make_options(model)) as session:
            await session.send("first")
            await until(session.events(), Result)
            events = await send_and_kill_mid_turn(session, "second", calls, answering=2)
            await session.wait_idle()
    assert of(events, Restarted)[0].resumed
    assert of(events, Result)[-1].result == "echo: second"  # the same message, answered after the restart
    assert calls.count("second") == 2 and session.turns_completed == 2
