"""Fan one session's events out to several consumers (UI tabs, loggers), each at its own pace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from .._events import Event


class Broadcast:
    """Observer: every event to every subscriber's bounded stream; a subscriber that falls behind misses events
    (counted in `dropped`) rather than holding the others up."""

    name = "broadcast"

    def __init__(self, *, buffer: int = 1000) -> None:
        self.buffer = buffer
        self._subscribers: list[MemoryObjectSendStream[Event]] = []
        self.dropped = 0

    def on_event(self, event: Event) -> None:
        for send in list(self._subscribers):
            try:
                send.send_nowait(event)
            except anyio.WouldBlock:
                self.dropped += 1  # a subscriber that does not keep up misses events, others do not wait
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._subscribers.remove(send)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[Event]]:
        """`async with broadcast.subscribe() as events: async for event in events: …`"""
        send, receive = anyio.create_memory_object_stream[Event](self.buffer)
        self._subscribers.append(send)
        try:
            yield receive
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()
            receive.close()
