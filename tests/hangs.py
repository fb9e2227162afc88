"""Where a hung test waits, said before pytest-timeout stops it.

A test past `timeout` (pyproject.toml) is ended by pytest-timeout's thread method, which under xdist takes its
worker down with nothing said but "node down: Not properly terminated". A little before that, this plugin
writes every thread's stack and every running event loop's tasks, each as its chain of awaits (a thread's
stack shows only the loop's select: the coroutine that waits is in the chain), to the stderr pytest started
with, which reaches the run's output from a worker too."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any, TextIO

import pytest

AHEAD = 15.0  # seconds before pytest-timeout's end


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
    """Every thread's stack and every running loop's tasks, to `out`."""
    out.write(f"\n+++ {nodeid} has run for {seconds:g} s: where it waits +++\n")
    out.flush()
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        out.write(f"thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame)))
    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]
    for loop in loops:
        for task in list(asyncio.all_tasks(loop)):
            out.write(f"task {task.get_name()} ({task.get_coro()!r:.120}), awaiting:\n")
            out.write("\n".join(awaits(task.get_coro())) + "\n")
    out.write(f"+++ end of {nodeid} +++\n")
    out.flush()


_stderr: TextIO | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _stderr
    _stderr = os.fdopen(os.dup((sys.__stderr__ or sys.stderr).fileno()), "w", closefd=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    timeout = float(item.config.getini("timeout") or 0)
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        timeout = float(marker.args[0])
    timer = None
    if timeout > AHEAD and _stderr is not None:
        timer = threading.Timer(timeout - AHEAD, where, (_stderr, item.nodeid, timeout - AHEAD))
        timer.daemon = True
        timer.start()
    try:
        return (yield)
    finally:
        if timer is not None:
            timer.cancel()
