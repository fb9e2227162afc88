"""Independent awaitables of one test run side by side: two games each spend most of a turn waiting on their
claude and their interpreter, so together they take little more wall time than one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio


async def side_by_side(*calls: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Each call's result, in the order given; the first failure cancels the others and is raised."""
    results: list[Any] = [None] * len(calls)

    async def run(index: int, call: Callable[[], Awaitable[Any]]) -> None:
        results[index] = await call()

    async with anyio.create_task_group() as group:
        for index, call in enumerate(calls):
            group.start_soon(run, index, call)
    return results
