"""Each turn's own cost: claude reports a running total per session (a resumed session's new process carries it
on), and `TurnCost` turns it into what each turn cost, so a consumer adds turns up across processes."""

import anyio
import pytest

from frobozz.engine import Result, Session, TurnCost, list_sessions, parse_event
from frobozz.engine.testing import ScriptedModel
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
