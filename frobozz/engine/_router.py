"""The router: every event to every observer, each on its own task and buffer, so a failing or
slow observer never stops the stream or the others. Its failures come back as ErrorEvents.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from ._events import ErrorEvent, Event

log = logging.getLogger("frobozz.engine.router")


@runtime_checkable
class Observer(Protocol):
    """Watches the output stream. `on_event` may be a plain or an async method."""

    def on_event(self, event: Event) -> None | Awaitable[None]: ...


def observer_name(observer: object) -> str:
    return getattr(observer, "name", None) or type(observer).__name__


class Router:
    def __init__(self, observers: Sequence[Observer], *, report: Callable[[Event], None], buffer: int = 10_000) -> None:
        self.observers = list(observers)
        self._report = report
        self._buffer = buffer
        self._inboxes: list[tuple[Observer, MemoryObjectSendStream[Event]]] = []
        self._lagging: set[int] = set()

    def start(self, task_group: TaskGroup) -> None:
        for observer in self.observers:
            send, receive = anyio.create_memory_object_stream[Event](self._buffer)
            self._inboxes.append((observer, send))
            task_group.start_soon(self._deliver, observer, receive)

    def dispatch(self, event: Event) -> None:
        """Hand `event` to every observer without waiting for any of them."""
        for index, (observer, inbox) in enumerate(self._inboxes):
            try:
                inbox.send_nowait(event)
                self._lagging.discard(index)
            except anyio.WouldBlock:
                if index not in self._lagging:  # say so once per stretch of lag, not per event
                    self._lagging.add(index)
                    self._report(ErrorEvent(source=f"observer:{observer_name(observer)}", message=(
                        f"observer is {self._buffer} events behind; events are dropped for it until it catches up")))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

    def close(self) -> None:
        for _, inbox in self._inboxes:
            inbox.close()

    async def _deliver(self, observer: Observer, receive: anyio.abc.ObjectReceiveStream[Event]) -> None:
        name = observer_name(observer)
        async with receive:
            async for event in receive:
                try:
                    result = observer.on_event(event)
                    if inspect.isawaitable(result):
                        await result
                except Exception as e:  # isolated: reported, and the observer keeps getting events
                    log.warning("observer %s failed on %s: %s", name, type(event).__name__, e)
                    self._report(ErrorEvent(source=f"observer:{name}", message=f"{type(e).__name__}: {e}"))
