"""The warm spare: a claude started ahead of need, taken over by a new session with options that launch the
same claude, closed on shutdown, and gone with its parent."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import anyio
import pytest

from frobozz.engine import (
    Deny,
    Engine,
    EngineOptions,
    EngineSettings,
    HookMatcher,
    Result,
    Session,
    WarmSpare,
    launch_key,
    started,
    transcript_path,
)
from frobozz.engine._spare import REHEARSAL, _hooks_beyond_the_engine
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse, replies
from tests.engine.conftest import until
from tests.orphans import running, still_running

pytestmark = pytest.mark.anyio


async def answer(session: Session, text: str) -> str:
    await session.send(text)
    async for event in session.events():
        if isinstance(event, Result):
            return event.result or ""
    raise AssertionError("no result")


async def test_a_new_session_takes_the_spare_over_and_the_next_spare_starts_behind_it(make_options):
    async with ScriptedModel(lambda r: f"You said: {r.last_user_text()}") as model:
        options = make_options(model, include_partial_messages=True)
        async with WarmSpare() as spare:
            assert spare.live == 0  # the empty case: nothing primed, nothing started
            spare.prime(options)
            with anyio.fail_after(120):
                await spare.wait_ready()
            waiting = spare._ready.pid
            async with Session(options, spare=spare) as session:
                assert session.engine.pid == waiting  # no claude was started for it
                assert await answer(session, "hello") == "You said: hello"
                with anyio.fail_after(120):
                    await spare.wait_ready()
                assert spare._ready.pid != waiting and spare.taken == 1
            assert not running_pid(waiting)  # closed with its session
            next_one = spare._ready.pid
        assert not running_pid(next_one)  # and the one waiting, with the spare


async def test_other_options_a_resumed_session_or_no_spare_start_their_own_claude(make_options):
    async with ScriptedModel(lambda r: "ok") as model:
        options = make_options(model)
        async with WarmSpare() as spare:
            spare.prime(options)
            with anyio.fail_after(120):
                await spare.wait_ready()
            waiting = spare._ready.pid
            async with Session(make_options(model, model="other-model"), spare=spare) as other:
                assert other.engine.pid != waiting and await answer(other, "hi") == "ok"
            session_id = other.session_id
            async with Session(options, spare=spare, resume=session_id) as resumed:
                assert resumed.engine.pid != waiting
            assert spare.taken == 0
            async with started(options, spare=spare) as engine:  # re-primed for the other model meanwhile
                assert engine.pid != waiting
    assert launch_key(options) == launch_key(EngineOptions(**{**options.__dict__}))
    assert launch_key(EngineOptions(session_id="0" * 32)) is None and launch_key(options) != launch_key(
        make_options(model, env={"EXTRA": "1"})
    )


async def test_the_taker_s_permission_callback_answers_not_the_one_the_spare_was_started_with(
    make_options, claude_home
):
    asked = []

    def refuse(who):
        async def can_use_tool(name, tool_input, context):
            asked.append(who)
            return Deny(f"refused by {who}")

        return can_use_tool

    target = claude_home / "x.txt"
    script = replies(Reply((ToolUse("Write", {"file_path": str(target), "content": "hi"}),)), "ok")
    async with ScriptedModel(script) as model:
        async with WarmSpare() as spare:
            spare.prime(make_options(model, can_use_tool=refuse("the spare's options")))
            with anyio.fail_after(120):
                await spare.wait_ready()
            async with Session(make_options(model, can_use_tool=refuse("the taker")), spare=spare) as session:
                assert spare.taken == 1
                await answer(session, "write a file")
    assert asked == ["the taker"] and not target.exists()
    assert "refused by the taker" in str(model.requests[1].tool_results()[0]["content"])


async def test_a_spare_dies_with_its_parent_killed_with_sigkill(make_options, tmp_path):
    async with ScriptedModel(lambda r: "ok") as model:
        options = make_options(model)
        script = textwrap.dedent(f"""
            import anyio
            from frobozz.engine import EngineOptions, WarmSpare
            async def main():
                async with WarmSpare() as spare:
                    spare.prime(EngineOptions(env={dict(options.env)!r}, cwd={str(options.cwd)!r}))
                    await spare.wait_ready()
                    print(spare._ready.pid, flush=True)
                    await anyio.sleep_forever()
            anyio.run(main)
        """)
        parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            with anyio.fail_after(120):
                line = await anyio.to_thread.run_sync(parent.stdout.readline)
            import psutil

            claude = psutil.Process(int(line))
            assert running(claude)
            os.kill(parent.pid, signal.SIGKILL)
            parent.wait()
            assert still_running([claude], within=10) == []
        finally:
            parent.kill()


def running_pid(pid: int) -> bool:
    import psutil

    try:
        return running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


async def test_the_spare_s_rehearsal_leaves_nothing_in_the_session_store_and_the_taker_s_session_is_kept(make_options):
    from frobozz.engine.testing import InMemorySessionStore

    store = InMemorySessionStore()
    async with ScriptedModel(lambda r: "the lamp is in the attic") as model:
        async with WarmSpare() as spare:
            spare.prime(make_options(model, session_store=store, session_project="primer"))
            with anyio.fail_after(120):
                await spare.wait_ready()
            async with Session(
                make_options(model, session_store=store, session_project="taker"), spare=spare
            ) as session:
                assert spare.taken == 1 and session.session_id is None  # its id comes with its first message
                assert await answer(session, "where is the lamp?") == "the lamp is in the attic"
                taken_id = session.session_id
    assert await store.list_sessions("primer") == []
    assert [s["session_id"] for s in await store.list_sessions("taker")] == [taken_id]
    assert len(model.requests) == 1  # the rehearsal asked the API nothing


async def test_a_cleared_spare_counts_until_its_claude_has_exited_and_none_starts_while_there_is_no_room(make_options):
    """Under a bound on claudes the spare counts until its process is gone, not merely until it is dropped."""
    room = [True]
    async with ScriptedModel(lambda r: "ok") as model:
        async with WarmSpare(room=lambda: room[0]) as spare:
            spare.prime(make_options(model))
            with anyio.fail_after(120):
                await spare.wait_ready()
            waiting = spare._ready.pid
            room[0] = False
            spare.drop()
            assert spare.live == 1  # dropped, but its claude is still closing
            with anyio.fail_after(60):
                await spare.clear()
            assert spare.live == 0 and not running_pid(waiting)
            spare.prime(make_options(model))  # no room: nothing starts
            assert spare.live == 0


async def test_a_spare_still_starting_when_primed_for_other_options_serves_neither(make_options):
    """Primed for A, then for B while A's claude starts, then A again: the claude starting was started for A but
    is closed once up (it belongs to a dropped generation), so it fits no one and is not waited for as if it did;
    a bound on claudes must make room for it to go (this race let a second claude run past --max-live)."""
    async with ScriptedModel(lambda r: "ok") as model:
        first, other = make_options(model), make_options(model, model="other-model")
        async with WarmSpare() as spare:
            assert not spare.fits(first)  # the empty case: nothing primed
            spare.prime(first)
            assert spare.fits(first) and spare.live == 1  # starting, for these options
            spare.prime(other)  # the one starting is dropped: nothing new starts until it is gone
            assert not spare.fits(other) and spare.live == 1
            spare.prime(first)
            assert not spare.fits(first)  # its options again, but the claude starting is a dropped one
            with anyio.fail_after(120):
                await spare.wait_ready()  # the dropped one closes, and the next starts for these options
            assert spare.fits(first) and spare.started == 2 and spare.live == 1


async def test_the_spare_rehearses_a_first_turn_that_reaches_no_model_calls_no_hook_and_leaves_no_transcript(
    make_options, claude_home
):
    """What claude does on a session's first model request is done ahead, and the first real answer and its cost
    are a cold session's."""
    called = []

    async def record(hook_input):
        called.append((hook_input.event, hook_input.prompt))

    hooks = {"UserPromptSubmit": [HookMatcher([record])], "Stop": [HookMatcher([record])]}
    async with ScriptedModel(lambda r: f"You said: {r.last_user_text()}") as model:
        options = make_options(model, hooks=hooks)
        async with Session(options) as cold:
            await cold.send("Where am I?")
            cold_result = (await until(cold.events(), Result))[-1]
        async with WarmSpare() as spare:
            spare.prime(options)
            with anyio.fail_after(120):
                await spare.wait_ready()
            assert len(model.requests) == 1  # the cold session's: the rehearsal's was answered by the proxy
            assert called == [("UserPromptSubmit", "Where am I?"), ("Stop", None)]  # the cold session's only
            folder = transcript_path(cold_result.session_id, claude_home, options.env).parent
            assert not [p for p in folder.glob("*.jsonl") if REHEARSAL in p.read_text()]
            async with Session(options, spare=spare) as warm:
                assert spare.taken == 1
                await warm.send("Where am I?")
                warm_result = (await until(warm.events(), Result))[-1]
    assert warm_result.result == cold_result.result == "You said: Where am I?"
    assert warm_result.total_cost_usd == cold_result.total_cost_usd and warm_result.usage == cold_result.usage
    assert len(model.requests) == 2 and called[2:] == called[:2]


async def test_with_hooks_in_claude_s_settings_or_a_plugin_enabled_only_clear_is_rehearsed(make_options, claude_home):
    """claude's own settings hooks are not the engine's to silence: they would see a rehearsed turn as a real one
    (a memory plugin would keep it), so the spare rehearses only `/clear` then; the setting turns the turn off too."""
    log = claude_home / "hooks.log"
    command = {"type": "command", "command": f"cat >> {log}; echo >> {log}"}
    settings_file = claude_home / ".claude" / "settings.json"
    settings_file.parent.mkdir()

    async def prompts_seen(settings: EngineSettings) -> list[str]:
        log.unlink(missing_ok=True)
        async with WarmSpare(settings) as spare:
            spare.prime(make_options(model))
            with anyio.fail_after(120):
                await spare.wait_ready()
        return [json.loads(line)["prompt"] for line in log.read_text().splitlines() if line] if log.exists() else []

    async with ScriptedModel(lambda r: "ok") as model:
        settings_file.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [command]}]}}))
        assert await prompts_seen(EngineSettings()) == []  # the hook saw no rehearsed prompt
        assert await prompts_seen(EngineSettings(rehearse_first_turn=False)) == []
        for hostile in ("{not json", "[1, 2]"):  # a file that cannot be read counts as having hooks
            settings_file.write_text(hostile)
            assert _hooks_beyond_the_engine(Engine(make_options(model)))
        settings_file.write_text(json.dumps({"enabledPlugins": {"memory@frobozz": True}}))
        assert _hooks_beyond_the_engine(Engine(make_options(model)))
        settings_file.write_text(json.dumps({"enabledPlugins": {"memory@frobozz": False}, "model": "x"}))
        assert not _hooks_beyond_the_engine(Engine(make_options(model)))
        assert _hooks_beyond_the_engine(Engine(make_options(model, plugins=(str(claude_home),))))
        assert model.requests == []
