"""Running two awaitables at once, errors coming out plainly: a leaf module that imports nothing of Frobozz."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import anyio

A = TypeVar("A")
B = TypeVar("B")
T = TypeVar("T")


async def both(first: Callable[[], Awaitable[A]], second: Callable[[], Awaitable[B]]) -> tuple[A, B]:
    """Both results, computed at once; the first error stops the other and comes out plainly (not
    wrapped in a task group's ExceptionGroup), so callers catch their own error types as usual."""
    a, b = await every([first, second])
    return a, b


async def every(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Each call's result, in order, all computed at once; errors come out as in `both`."""
    results: list[Any] = [None] * len(calls)
    failures: list[Exception] = []

    async def run(index: int, call: Callable[[], Awaitable[Any]], scope: anyio.CancelScope) -> None:
        try:
            results[index] = await call()
        except Exception as e:  # noqa: BLE001 - re-raised below, outside the task group
            failures.append(e)
            scope.cancel()

    async with anyio.create_task_group() as tg:
        for index, call in enumerate(calls):
            tg.start_soon(run, index, call, tg.cancel_scope)
    if failures:
        raise failures[0]
    return results


async def while_following(request: Callable[[], Awaitable[T]], follow: Callable[[], Coroutine[Any, Any, None]]) -> T:
    """`request`'s result, with `follow` (a progress loop) running beside it and cancelled when the
    request ends; the request's error comes out plainly, as in `both`."""
    outcome: list[T] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(follow)
        try:
            outcome.append(await request())
        except Exception as e:  # noqa: BLE001 - re-raised below, outside the task group
            failure.append(e)
        tg.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0]


async def until_stopped(
    serve: Callable[[], Awaitable[None]],
    stopping: anyio.Event,
    errors: tuple[type[BaseException], ...],
    log: logging.Logger,
    what: str,
) -> None:
    """`serve` until it returns or `stopping` is set; when it fails with one of `errors` (a database gone
    away), again after a wait that doubles from half a second to half a minute."""
    delay = 0.5
    while not stopping.is_set():
        try:
            await serve()
            return
        except* errors as group:
            log.warning("%s failed (%s): trying again in %.1f s", what, group.exceptions[0], delay)
        with anyio.move_on_after(delay):
            await stopping.wait()
        delay = min(delay * 2, 30)


def first_leaf(error: Exception) -> Exception:
    """The first error a task group's group of errors holds (the error itself when it is not a group): the one
    that says what happened."""
    while isinstance(error, ExceptionGroup):
        error = error.exceptions[0]
    return error
