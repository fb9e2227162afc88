"""Tools mode's watcher, told claude's events by hand: when a game call may go on (its gate waits until the call
before it has been taken in)."""

import anyio
import anyio.lowlevel
import pytest

from frobozz.engine import AssistantMessage, ToolResultBlock, ToolUseBlock, UserMessage
from frobozz.runner._context import RunContext
from frobozz.runner._game_producers import ToolWatcher
from tests.events import turn_end
from tests.web.conftest import new_run

pytestmark = pytest.mark.anyio
STATE = '{"session_id": "0123456789abcdef", "text": "West of House", "score": 0, "moves": 1}'


@pytest.fixture
def watcher(tmp_path) -> ToolWatcher:
    store = new_run(tmp_path / "runs", player="walkthrough", mode="tools", max_turns=2, multi=True)
    return ToolWatcher(RunContext(store, max_score=350), "Zork I")


def acts(*ids: str) -> AssistantMessage:
    content = tuple(ToolUseBlock(id=i, name="mcp__game__act", input={"command": "n"}) for i in ids)
    return AssistantMessage(session_id="s", message_id="m1", model="scripted", content=content)


def answer(call_id: str) -> UserMessage:
    return UserMessage(session_id="s", content=(ToolResultBlock(tool_use_id=call_id, content=STATE),))


async def test_a_call_goes_on_once_the_answer_before_it_is_taken_in_and_not_before(watcher):
    watcher.on_event(acts("a1", "a2"))
    with anyio.move_on_after(0.2) as waited:
        await watcher.took_in("a1")
    assert waited.cancelled_caught  # not answered yet
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.took_in, "a1")
        await anyio.lowlevel.checkpoint()
        watcher.on_event(answer("a1"))
    assert [r.command for r in watcher.context.records] == ["n"]  # recorded by the time the wait ended


async def test_the_answer_that_ends_the_run_lets_the_next_call_go_on_to_be_refused(watcher):
    watcher.on_event(acts("a1", "a2", "a3"))
    watcher.on_event(answer("a1"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.took_in, "a2")
        await anyio.lowlevel.checkpoint()
        watcher.on_event(answer("a2"))  # the second turn of two: the run ends
    assert watcher.context.finished.is_set() and watcher.context.info.turns == 2


async def test_a_wait_ends_with_the_turn_that_left_the_call_unanswered_or_with_the_run_ended_from_outside(watcher):
    watcher.on_event(acts("a1", "a2"))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.took_in, "a1")
            await anyio.lowlevel.checkpoint()
            watcher.on_event(turn_end())  # claude ended the turn (an interrupt): a1 will not be answered
        watcher.on_event(acts("b1"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.took_in, "b1")
            await anyio.lowlevel.checkpoint()
            watcher.context.finish("time limit")  # no answer comes, and nothing else is said to the watcher
