"""Waiting for what the code under test offers no event for (another process's state: a row, an HTTP status, a
file, a count), by asking again until it holds. The one polling loop of the tests: everything else waits on an
event. It has no limit of its own: the caller's `anyio.fail_after` (or pytest's timeout) bounds it."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import anyio


async def eventually(predicate: Callable[[], object], *, interval: float = 0.05) -> None:
    """Return once `predicate()` (plain or awaitable) is truthy, asking every `interval` seconds."""
    while not await _holds(predicate):  # noqa: ASYNC110 - the state is another process's: no event to wait on
        await anyio.sleep(interval)


async def _holds(predicate: Callable[[], object]) -> bool:
    result = predicate()
    return bool(await result) if inspect.isawaitable(result) else bool(result)
