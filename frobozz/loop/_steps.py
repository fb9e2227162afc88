"""The steps of background work on the database (suggestions after a turn, capsules of earlier conversation):
each goes through a guard, which bounds it (memory's `quietly`, on the service the work is on); a step the guard
leaves out (slower than its bound, a database that does not answer, memory off) raises LeftOut, and the rest of
the work is left out with it: on a database that hangs, background work waits out one bound, not one a step,
and none waits forever."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
_LEFT_OUT: Any = object()


class LeftOut(Exception):
    """A step of background work was left out (its guard said why, or memory is off): the rest of it is too."""


class BackgroundStep(Protocol):
    """`await step(part, work)`: `work`'s result, or LeftOut (`part` names it in the guard's line)."""

    def __call__(self, part: str, work: Awaitable[T], /) -> Awaitable[T]: ...


class Quietly(Protocol):
    """Memory's `quietly` on a service (as a session or the plugin's daemon has it): `work`'s result, or
    `default` when it is left out."""

    def __call__(self, part: str, work: Awaitable[T], default: T, *, within: float) -> Awaitable[T]: ...


async def unbounded(part: str, work: Awaitable[T], /) -> T:
    """No guard: the step's own result, or its error (a caller that bounds the whole work itself, a test)."""
    return await work


def bounded_steps(quietly: Quietly, *, within: float) -> BackgroundStep:
    """Steps through `quietly`, each within `within` seconds: one it leaves out raises LeftOut."""

    async def step(part: str, work: Awaitable[T], /) -> T:
        done = await quietly(part, work, _LEFT_OUT, within=within)
        if done is _LEFT_OUT:
            raise LeftOut(part)
        return done

    return step
