"""Idle sessions let their claude go and take it up again on the next message; `max_live` bounds the claude
processes at once (a session with memory counts its sidecars), the least recently used idle one let go first."""

import json
import os
import signal

import anyio
import asyncpg
import pytest

from frobozz.agent import Done, Error
from tests.agent.test_agent import turn
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


async def released(session) -> None:
    with anyio.fail_after(30):
        await eventually(lambda: session.engine is None, interval=0.02)


async def test_an_idle_session_lets_its_claude_go_and_the_next_message_resumes_it(make_agent):
    async with make_agent(idle_timeout=0.5) as agent:
        session = await agent.create_session("alice/notes")
        first = (await turn(agent, session, "the password is plugh"))[-1]
        live = await agent.session(session)
        pid = live.engine._process.pid
        await released(live)
        assert not alive(pid)
        events = await turn(agent, session, "what came before?")
        [listed] = await agent.sessions()
    assert isinstance(events[-1], Done) and "the password is plugh" in events[-1].result
    # the resumed claude carries the session's cost total on: the turn costs what it added, not the total again
    assert first.cost_usd > 0 and events[-1].cost_usd == pytest.approx(first.cost_usd)
    assert listed["cost_usd"] == pytest.approx(2 * first.cost_usd)


async def test_max_live_bounds_the_claudes_and_lets_the_least_recently_used_idle_one_go(make_agent):
    async with make_agent(max_live=2) as agent:
        sessions = [await agent.create_session(f"alice/s{n}") for n in range(3)]
        most = 0

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, sum(1 for s in agent._live.values() if s.engine is not None))
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await turn(agent, sessions[0], "first: lamp")
            await turn(agent, sessions[1], "second: rope")
            await turn(agent, sessions[2], "third: garlic")  # the first, least recently used, is let go
            lives = [await agent.session(s) for s in sessions]
            assert lives[0].engine is None and lives[1].engine is not None and lives[2].engine is not None
            events = await turn(agent, sessions[0], "what came before?")  # now the second goes
            assert lives[1].engine is None
            tg.cancel_scope.cancel()
    assert most == 2
    assert "first: lamp" in events[-1].result


async def test_a_session_with_memory_counts_its_sidecars_against_max_live(make_agent):
    async with make_agent(max_live=3) as agent:
        remembering = await agent.create_session("alice/notes", memory={"namespace": "house"})
        plain = await agent.create_session("alice/plain")
        await turn(agent, remembering, "hello")
        live = await agent.session(remembering)
        assert live.claudes == 3 and live.engine is not None
        events = await turn(agent, plain, "hi")  # 3 live + 1 is over the bound: the idle memory session goes
        assert isinstance(events[-1], Done) and live.engine is None


async def test_a_new_session_s_first_message_is_answered_by_the_claude_started_when_the_session_was_made(make_agent):
    async with make_agent(warm_spare=True) as agent:
        session = await agent.create_session("alice/notes")
        with anyio.fail_after(120):
            await agent.spare.wait_ready()  # started while the user writes the first message
        waiting = agent.spare._ready.pid
        events = await turn(agent, session, "hello")
        assert isinstance(events[-1], Done) and "You said: hello" in events[-1].result
        assert (await agent.session(session)).engine.pid == waiting and agent.spare.taken == 1
        with anyio.fail_after(120):
            await agent.spare.wait_ready()  # and the next one, for the next session like it
        behind = agent.spare._ready.pid
    assert not alive(waiting) and not alive(behind)  # the service's shutdown closes both


async def test_the_spare_counts_under_max_live_and_is_let_go_before_a_session(make_agent):
    async with make_agent(max_live=1, warm_spare=True) as agent:
        first = await agent.create_session("alice/one")
        await turn(agent, first, "one")  # took the spare; no room for another under max_live=1
        assert agent.spare.live == 0
        second = await agent.create_session("alice/two")
        await turn(agent, second, "two")  # the first session (idle) goes: one claude at a time
        assert (await agent.session(first)).engine is None and agent.spare.live == 0


async def test_a_session_with_memory_takes_the_spare_for_its_loop_s_claude(make_agent):
    async with make_agent(warm_spare=True) as agent:
        session = await agent.create_session("alice/notes", memory={"namespace": "house"})
        with anyio.fail_after(120):
            await agent.spare.wait_ready()
        waiting = agent.spare._ready.pid
        events = await turn(agent, session, "hello")
        assert isinstance(events[-1], Done) and (await agent.session(session)).engine.pid == waiting


@pytest.mark.parametrize("warm_spare", [False, True], ids=["own claude", "the spare's claude"])
async def test_a_session_whose_claude_will_not_close_does_not_hold_the_service_s_shutdown_up(
    make_agent, monkeypatch, warm_spare, cortex_settings
):
    """The claude is stopped with the service; its session's lease is left to lapse, not handed over at once:
    another instance must not resume a transcript that claude may still be writing."""
    with anyio.fail_after(120):  # (unbounded, the shutdown's shield would outlast this too: pytest's timeout ends it)
        async with make_agent(shutdown_timeout=0.5, warm_spare=warm_spare) as agent:
            session = await agent.create_session("alice/notes")
            await turn(agent, session, "hello")
            live = await agent.session(session)
            pid = live.engine._process.pid
            assert (agent.spare.taken if warm_spare else 0) == int(warm_spare)

            async def stuck() -> None:  # as a claude whose close never ends would be
                await anyio.sleep_forever()

            monkeypatch.setattr(live.engine, "close", stuck)  # (the release's own wait is shielded: bounded there)
    assert not alive(pid)  # stopped with the service's task group instead
    connection = await asyncpg.connect(cortex_settings.database_url.get_secret_value())
    try:
        assert await connection.fetchval("SELECT count(*) FROM agent_leases WHERE session_id = $1", session) == 1
    finally:
        await connection.close()


async def test_a_claude_that_cannot_be_set_up_fails_its_turn_and_the_next_message_and_the_shutdown_go_on(
    make_agent, monkeypatch
):
    """Setting up a claude can fail before it starts (the skills cannot be copied: a full disk): that turn
    says so, and nothing waits for a claude that never was."""
    with anyio.fail_after(120):
        async with make_agent() as agent:
            session = await agent.create_session("alice/notes")
            sync = agent.workspaces.sync_skills

            def full_disk(workspace):
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(agent.workspaces, "sync_skills", full_disk)
            failed = await turn(agent, session, "hello")
            assert any(isinstance(e, Error) and "No space left" in e.message for e in failed)
            live = await agent.session(session)
            try:  # the driver is not left waiting for that claude (shielded: the shutdown would wait with it)
                with anyio.fail_after(10):
                    await eventually(lambda: not live.busy, interval=0.02)
            finally:
                live._engine_done.set()  # (so that a failure here is a failure, not a hung run)
            monkeypatch.setattr(agent.workspaces, "sync_skills", sync)
            events = await turn(agent, session, "and now?")
            assert isinstance(events[-1], Done) and "You said: and now?" in events[-1].result


async def test_a_session_made_on_a_full_disk_is_kept_and_its_first_turn_says_what_fails(
    make_agent, monkeypatch, caplog
):
    """Starting its claude ahead (the warm spare, with the skills copied) is only a head start: when it cannot
    be done, the session made is still answered and listed, and its first turn says why it cannot start."""
    with anyio.fail_after(120):
        async with make_agent(warm_spare=True) as agent:
            sync = agent.workspaces.sync_skills

            def full_disk(workspace):
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(agent.workspaces, "sync_skills", full_disk)
            session = await agent.create_session("alice/notes")
            assert [s["session_id"] for s in await agent.sessions()] == [session]
            assert "not started ahead: [Errno 28] No space left on device" in caplog.text
            failed = await turn(agent, session, "hello")
            assert any(isinstance(e, Error) and "No space left" in e.message for e in failed)
            monkeypatch.setattr(agent.workspaces, "sync_skills", sync)
            events = await turn(agent, session, "and now?")
            assert isinstance(events[-1], Done) and "You said: and now?" in events[-1].result


async def test_a_session_closed_while_its_message_waits_for_room_starts_no_claude_for_it(
    make_agent, scripted, monkeypatch
):
    """Its release came while the driver waited under max_live: no claude is started after it for a message
    nobody will read (it would have been a model call, in a session that is gone). The wait is held open: the
    letting go of one's idle claude, which two's driver waits for, waits until two is closed (the test timed one
    reply's pace against it, and on a loaded machine two's claude had started and been asked first)."""
    async with make_agent(max_live=1) as agent:
        one, two = [await agent.create_session(f"alice/s{n}") for n in range(2)]
        await turn(agent, one, "hello from one")  # its claude stays, idle: two's driver must wait for it to go
        letting_go, go_on, let_go = anyio.Event(), anyio.Event(), agent._placement._let_go

        async def held(session):
            letting_go.set()
            await go_on.wait()
            await let_go(session)

        monkeypatch.setattr(agent._placement, "_let_go", held)
        waiting = await agent.session(two)
        await agent.post_message(waiting, "hello from two")
        with anyio.fail_after(60):
            await letting_go.wait()
        assert waiting.busy and not waiting.reserved  # its driver waits for room
        await agent.close_session(two)
        go_on.set()
        with anyio.fail_after(60):  # room for two's driver, which must not use it
            await eventually(lambda: not waiting._busy, interval=0.02)  # (its driver's own flag: done with it)
        assert waiting.engine is None
        assert not any("hello from two" in json.dumps(r.messages) for r in scripted.requests)


async def test_a_turn_after_the_sessions_claude_was_killed_and_restarted_costs_what_it_added(make_agent):
    """claude, killed with -9 between turns, is restarted on its session and carries on from the total saved at
    its last graceful exit (the first turn's, at its release), not from the one it had reached: the next turn
    costs what it added (it was said to cost $0: the same total as before the kill)."""
    async with make_agent() as agent:
        session = await agent.create_session("alice/notes")
        first = (await turn(agent, session, "the password is plugh"))[-1]
        live = await agent.session(session)
        await live.release()  # a graceful exit: claude saves its total
        second = (await turn(agent, session, "and the lamp?"))[-1]
        engine = live.engine
        assert engine is not None and engine.pid is not None
        pid = engine.pid
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(30):
            await eventually(lambda: engine.pid not in (None, pid) and engine.state.value == "running", interval=0.02)
        third = (await turn(agent, session, "what came before?"))[-1]
        [listed] = await agent.sessions()
    assert isinstance(third, Done) and "the password is plugh" in third.result
    assert first.cost_usd > 0 and [second.cost_usd, third.cost_usd] == pytest.approx([first.cost_usd] * 2)
    assert listed["cost_usd"] == pytest.approx(3 * first.cost_usd)
