"""Each turn's own cost: claude reports a running total per session (a resumed session's new process carries on
from the last total saved in its transcript, at a graceful exit), and `TurnCost` turns it into what each turn
cost, so a consumer adds turns up across processes."""

import anyio
import pytest

from frobozz.engine import (
    Engine,
    ProcessExit,
    Restarted,
    Result,
    Session,
    TurnCost,
    list_sessions,
    parse_event,
    transcript_path,
)
from frobozz.engine.testing import InMemorySessionStore, ScriptedModel
from tests.engine.conftest import of, until, wait_for_file
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def echo(request):
    return "echo: " + request.last_user_text()


def _result(total: float | None, *, session: str = "s", replay: bool = False) -> Result:
    event = parse_event(
        {"type": "result", "subtype": "success", "session_id": session, "total_cost_usd": total, "usage": {}},
        is_replay=replay,
    )
    assert isinstance(event, Result)
    return event


def test_a_running_total_becomes_each_turns_cost_per_session():
    costs = TurnCost()
    assert costs.of(_result(None)) is None  # no cost reported: none made up
    assert costs.of(_result(0.25)) == 0.25
    assert costs.of(_result(0.75)) == 0.5
    assert costs.of(_result(0.5, replay=True)) == 0.0  # history costs nothing now
    assert costs.of(_result(0.125, session="t")) == 0.125  # another session has a total of its own
    assert costs.of(_result(1.0)) == 0.25
    assert costs.of(_result(0.0625)) == 0.0625  # a smaller total: claude counted anew
    costs.resumed("u", 2.0)  # seen by an earlier process of the consumer
    assert costs.of(_result(2.5, session="u")) == 0.5


async def test_a_resumed_sessions_first_turn_and_its_second_each_cost_their_own_share(make_options, claude_home):
    costs = TurnCost()
    async with ScriptedModel(echo) as model:
        async with Session(make_options(model)) as first:
            await first.send("one")
            [one] = of(await until(first.events(), Result), Result)
            await first.send("two")
            [two] = of(await until(first.events(), Result), Result)
            session_id = first.session_id
        spent = [costs.of(one), costs.of(two)]
        options = make_options(model)
        await wait_for_file(claude_home / ".claude" / "projects")
        with anyio.fail_after(10):
            await eventually(lambda: list_sessions(options.cwd, options.env), interval=0.02)
        async with Session(options, resume=session_id) as second:  # a new claude process
            await second.send("three")
            [three] = [r for r in of(await until(second.events(), Result), Result) if not r.is_replay]
            await second.send("four")
            [four] = of(await until(second.events(), Result), Result)
        spent += [costs.of(three), costs.of(four)]
        later = TurnCost()  # a consumer in a process of its own, resuming with what it had recorded
        later.resumed(session_id, sum(spent[:2]))
    turn = one.total_cost_usd
    assert turn is not None and turn > 0  # claude prices the scripted model as a paid one
    # the resumed process carries the session's total on (claude restores it): its first turn is what it grew by
    assert three.total_cost_usd == pytest.approx(3 * turn)
    assert spent == pytest.approx([turn] * 4)  # the same small turn each time, never the session's total again
    assert later.of(three) == pytest.approx(turn)


async def turn(engine: Engine, text: str) -> Result:
    await engine.send(text)
    [result] = [r for r in of(await until(engine.events(), Result), Result) if not r.is_replay]
    return result


async def test_a_session_whose_claude_was_killed_resumes_on_another_machine_from_the_total_claude_saved_last(
    make_options, tmp_path
):
    """Turn one ends with a graceful exit (its total saved); turn two's claude is killed with -9 (its total saved
    nowhere). Resumed from the store on a machine that never saw the session, claude starts from turn one's total:
    read from the transcript the engine brought from the store, which is there only once the engine has started."""
    store = InMemorySessionStore()
    costs = TurnCost()
    async with ScriptedModel(echo) as model:

        def on(machine: str, **more: object):
            (tmp_path / machine).mkdir(exist_ok=True)
            env = {"HOME": str(tmp_path / machine)}
            return make_options(model, env=env, session_store=store, session_store_flush="eager", **more)

        async with Engine(on("first")) as engine:
            await engine.start()
            one = await turn(engine, "one")
            session = engine.session_id
        assert session is not None
        async with Engine(on("first", max_restarts=0)) as engine:
            await engine.start(session)
            before_two = costs.resumed_by(engine)
            two = costs.of(await turn(engine, "two"))
            engine.kill()
            await until(engine.events(), ProcessExit)
        options = on("second")
        async with Engine(options) as engine:
            assert costs.resumed_by(engine) is None  # (not started: no session, and no transcript here yet)
            assert not transcript_path(session, engine.cwd, engine.env).exists()
            await engine.start(session)
            restored = costs.resumed_by(engine)
            three = await turn(engine, "three")
            third = costs.of(three)
    price = one.total_cost_usd
    assert price is not None and price > 0
    assert before_two == pytest.approx(price) and two == pytest.approx(price)
    assert restored == pytest.approx(price)  # not two's total: that claude was killed before it saved it
    assert three.total_cost_usd == pytest.approx(2 * price) and third == pytest.approx(price)


async def test_a_claude_that_crashed_and_was_restarted_carries_on_from_the_total_it_saved_last(make_options):
    """The restarted claude restores the total its session's last graceful exit saved, not the one the crashed
    claude reached: asked again on the Restarted event, the next turn costs its own share (it cost two turns'
    share less than the crashed claude's total, so all of its total was taken for this turn's)."""
    costs = TurnCost()
    async with ScriptedModel(echo) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            one = await turn(engine, "one")
            session = engine.session_id
        async with Engine(make_options(model)) as engine:
            await engine.start(session)
            assert costs.resumed_by(engine) == pytest.approx(one.total_cost_usd)
            spent = [costs.of(await turn(engine, "two")), costs.of(await turn(engine, "three"))]
            engine.kill()
            [restarted] = of(await until(engine.events(), Restarted), Restarted)
            assert restarted.resumed and costs.resumed_by(engine) == pytest.approx(one.total_cost_usd)
            four = await turn(engine, "four")
            spent.append(costs.of(four))
    price = one.total_cost_usd
    assert price is not None and price > 0 and four.total_cost_usd == pytest.approx(2 * price)
    assert spent == pytest.approx([price] * 3)
