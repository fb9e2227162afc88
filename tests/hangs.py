"""Where a hung test waits, said before pytest-timeout stops it.

A test past its timeout (`timeout` in pyproject.toml, `--timeout`, or its `timeout` marker) is ended by
pytest-timeout's thread method, which under xdist takes its worker down with nothing said but "node down: Not
properly terminated". Fifteen seconds before that, this plugin writes every thread's stack and every running
event loop's tasks, each as its chain of awaits (a thread's stack shows only the loop's select: the coroutine
that waits is in the chain), to the stderr pytest started with, which reaches the run's output from a worker
too. It hooks pytest-timeout's own timer, so it goes by the same settings and is off when pytest-timeout is
(`-p no:timeout`); a timeout of 15 s or less gets no report."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import traceback
from typing import Any, TextIO

import pytest

AHEAD = 15.0  # seconds before pytest-timeout's end
_TIMER = pytest.StashKey[threading.Timer]()
_stderr: TextIO | None = None


def awaits(coroutine: Any) -> list[str]:
    """A coroutine's chain of awaits, outermost first: where each one is suspended."""
    lines = []
    while coroutine is not None:
        frame = _first(coroutine, "cr_frame", "gi_frame", "ag_frame")
        if frame is not None:
            lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
        coroutine = _first(coroutine, "cr_await", "gi_yieldfrom", "ag_await")
    return lines


def _first(obj: Any, *names: str) -> Any:
    """The first of `names` that `obj` has (a coroutine, a generator or an async generator), or None."""
    return next((getattr(obj, name) for name in names if hasattr(obj, name)), None)


def where(out: TextIO, nodeid: str, seconds: float) -> None:
    """Every other thread's stack and every running loop's tasks, to `out`; a failure is said there too (the
    report is all there will be: the worker goes soon after)."""
    out.write(f"\n+++ {nodeid} has run for {seconds:g} s: where it waits +++\n")
    try:
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident != threading.get_ident():  # not this report's own
                out.write(f"thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame)))
        loops = [o for o in gc.get_objects() if issubclass(type(o), asyncio.AbstractEventLoop) and o.is_running()]
        for loop in loops:
            for task in list(asyncio.all_tasks(loop)):
                out.write(f"task {task.get_name()} ({task.get_coro()!r:.120}), awaiting:\n")
                out.write("\n".join(awaits(task.get_coro())) + "\n")
    except Exception:  # noqa: BLE001 - a report cut short says why, rather than nothing
        out.write(f"the report stopped: {traceback.format_exc()}")
    out.write(f"+++ end of {nodeid} +++\n")
    out.flush()


def pytest_configure(config: pytest.Config) -> None:
    """The stderr the run started with, kept now: during a test, fd 2 is pytest's capture."""
    global _stderr
    _stderr = os.fdopen(os.dup((sys.__stderr__ or sys.stderr).fileno()), "w", closefd=True)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    """Beside pytest-timeout's timer (None: its own is set too), for the same test and time."""
    if _stderr is not None and settings.timeout > AHEAD:
        timer = threading.Timer(settings.timeout - AHEAD, where, (_stderr, item.nodeid, settings.timeout - AHEAD))
        timer.daemon = True
        item.stash[_TIMER] = timer
        timer.start()


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    """A report under way is finished before the next test's begins."""
    timer = item.stash.get(_TIMER, None)
    if timer is not None:
        del item.stash[_TIMER]
        timer.cancel()
        timer.join()
