"""The hang reporter (tests/hangs.py) names the await a stuck coroutine waits on, through every layer."""

import io

import anyio
import pytest

from tests.hangs import awaits, where

pytestmark = pytest.mark.anyio


async def stuck(event: anyio.Event) -> None:
    await event.wait()


async def test_a_stuck_task_is_reported_with_each_await_of_its_chain():
    event = anyio.Event()
    out = io.StringIO()
    async with anyio.create_task_group() as tg:
        tg.start_soon(stuck, event, name="the stuck one")
        await anyio.sleep(0.01)  # (a checkpoint: the task has reached its await)
        where(out, "a test", 285)
        event.set()
    report = out.getvalue()
    assert "a test has run for 285 s" in report and "task the stuck one" in report
    chain = report.split("task the stuck one")[1].split("task ")[0]
    assert "in stuck" in chain and "in wait" in chain  # the test's own coroutine, then anyio's Event.wait


def test_a_coroutine_that_is_not_suspended_has_a_chain_of_one_frame_or_none():
    async def never_started() -> None:
        pass

    coroutine = never_started()
    assert [line for line in awaits(coroutine) if "never_started" in line]
    coroutine.close()
    assert awaits(None) == []
