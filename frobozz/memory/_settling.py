"""The second step of a store, for concurrent stores into one namespace, as one call: a stored memory's words
go into its neighbours' context (`cortex_settle`, migration 009) under the namespace's lock, so stores into a
namespace take turns for it, and under 32 clients each waited behind every other's refresh, holding a pooled
connection meanwhile. Here the stores that arrive while a namespace's settle runs go together as the next one,
with all their ids (the function takes an array, as `cortex_heal` has it do), on one connection. Each store
still returns only once its own memory is settled, and a lone store waits for nobody."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

Settle = Callable[[str, list[int]], Awaitable[None]]


@dataclass
class _Namespace:
    waiting: list[int] = field(default_factory=list)
    done: anyio.Event = field(default_factory=anyio.Event)  # set when the batch now waiting has been settled
    turn: anyio.Lock = field(default_factory=anyio.Lock)  # one settle of the namespace at a time, here
    users: int = 0  # stores waiting or settling: the entry goes when none is left


class Settler:
    """`await settler.settle(namespace, memory_id)`: returns once that memory is settled. `settle` (the callable
    given) settles a batch of one namespace; it reports its own failures (a store's memory is kept either way)."""

    def __init__(self, settle: Settle) -> None:
        self._settle = settle
        self._namespaces: dict[str, _Namespace] = {}

    async def settle(self, namespace: str, memory_id: int) -> None:
        entry = self._namespaces.setdefault(namespace, _Namespace())
        entry.users += 1
        entry.waiting.append(memory_id)
        done = entry.done
        try:
            # shielded: the memory is stored already, and the others of its batch wait on whoever leads it
            with anyio.CancelScope(shield=True):
                if len(entry.waiting) == 1:  # the first of a batch leads it
                    async with entry.turn:  # the batch is taken once the last settle is over: late comers join
                        batch, entry.waiting, entry.done = entry.waiting, [], anyio.Event()
                        try:
                            await self._settle(namespace, batch)
                        finally:
                            done.set()
                else:
                    await done.wait()
        finally:
            entry.users -= 1
            if not entry.users and self._namespaces.get(namespace) is entry:
                del self._namespaces[namespace]
