"""Running two awaitables at once: a leaf module that imports nothing of Frobozz."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

A = TypeVar("A")
B = TypeVar("B")


async def both(first: Callable[[], Awaitable[A]], second: Callable[[], Awaitable[B]]) -> tuple[A, B]:
    """Both results, computed at once; the first error stops the other and comes out plainly (not
    wrapped in a task group's ExceptionGroup), so callers catch their own error types as usual."""
    results: list[Any] = [None, None]
    failures: list[Exception] = []

    async def run(index: int, call: Callable[[], Awaitable[Any]], scope: anyio.CancelScope) -> None:
        try:
            results[index] = await call()
        except Exception as e:  # re-raised below, outside the task group
            failures.append(e)
            scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, 0, first, tg.cancel_scope)
        await run(1, second, tg.cancel_scope)
    if failures:
        raise failures[0]
    return results[0], results[1]
