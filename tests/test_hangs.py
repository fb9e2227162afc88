"""The hang reporter (tests/hangs.py): it names the await a stuck coroutine waits on, through every layer, and
keeps to pytest-timeout's timer."""

import io
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import anyio
import pytest

from tests import hangs
from tests.hangs import awaits, where

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


async def stuck(event: anyio.Event) -> None:
    await event.wait()


@pytest.mark.anyio
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
    assert report.rstrip().endswith("+++ end of a test +++") and "the report stopped" not in report


def test_a_coroutine_that_is_not_suspended_has_a_chain_of_one_frame_or_none():
    async def never_started() -> None:
        pass

    coroutine = never_started()
    assert [line for line in awaits(coroutine) if "never_started" in line]
    coroutine.close()
    assert awaits(None) == []


def item() -> SimpleNamespace:
    """What the hooks use of a test: its id and its stash."""
    return SimpleNamespace(nodeid="tests/x.py::test_hung", stash=pytest.Stash())


def test_the_report_comes_ahead_of_pytest_timeout_s_end_and_a_cancel_after_it_waits_for_it_to_finish(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(hangs, "_stderr", out)
    monkeypatch.setattr(hangs, "AHEAD", 0.5)
    test = item()
    hangs.pytest_timeout_set_timer(test, SimpleNamespace(timeout=0.6))  # reported 0.1 s in
    deadline = time.monotonic() + 30
    while "has run for" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    hangs.pytest_timeout_cancel_timer(test)  # joins a report under way
    assert "+++ tests/x.py::test_hung has run for 0.1 s" in out.getvalue()
    assert out.getvalue().rstrip().endswith("+++ end of tests/x.py::test_hung +++")


def test_a_test_that_ends_in_time_or_has_a_short_timeout_is_not_reported(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(hangs, "_stderr", out)
    in_time, short = item(), item()
    hangs.pytest_timeout_set_timer(in_time, SimpleNamespace(timeout=hangs.AHEAD + 0.2))
    hangs.pytest_timeout_set_timer(short, SimpleNamespace(timeout=hangs.AHEAD))  # no time left to say it
    timer = in_time.stash[hangs._TIMER]
    assert hangs._TIMER not in short.stash
    hangs.pytest_timeout_cancel_timer(in_time)
    hangs.pytest_timeout_cancel_timer(short)
    assert not timer.is_alive() and hangs._TIMER not in in_time.stash  # cancelled and joined: it never runs
    assert out.getvalue() == ""


def test_without_pytest_timeout_the_plugin_loads_and_stays_out_of_the_way(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:timeout", "-p", "tests.hangs", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, "PYTHONPATH": ROOT},  # (its own run)
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
