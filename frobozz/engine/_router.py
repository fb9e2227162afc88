"""The router: every event to every observer, each on its own task and buffer, so a failing or
slow observer never stops the stream or the others. Its failures come back as ErrorEvents.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from ._events import ErrorEvent, Event

log = logging.getLogger("frobozz.engine.router")


@runtime_checkable
class Observer(Protocol):
    """Watches the output stream. `on_event` may be a plain or an async method."""

    def on_event(self, event: Event) -> Awaitable[None] | None: ...


def observer_name(observer: object) -> str:
    return getattr(observer, "name", None) or type(observer).__name__


class _Inbox:
    """One observer's events in waiting: a bounded deque, woken only when its reader sleeps."""

    __slots__ = ("closed", "items", "limit", "ready")

    def __init__(self, limit: int) -> None:
        self.items: deque[Event] = deque()
        self.limit = limit
        self.ready = anyio.Event()
        self.closed = False

    def put(self, event: Event) -> bool:
        if len(self.items) >= self.limit:
            return False
        self.items.append(event)
        if not self.ready.is_set():
            self.ready.set()
        return True

    def close(self) -> None:
        self.closed = True
        self.ready.set()


class Router:
    """Every event to every observer, each on its own task and buffer (see the module)."""

    def __init__(self, observers: Sequence[Observer], *, report: Callable[[Event], None], buffer: int = 10_000) -> None:
        self.observers = list(observers)
        self._report = report
        self._buffer = buffer
        self._inboxes: list[tuple[Observer, _Inbox]] = []
        self._lagging: set[int] = set()

    def start(self, task_group: TaskGroup) -> None:
        for observer in self.observers:
            inbox = _Inbox(self._buffer)
            self._inboxes.append((observer, inbox))
            task_group.start_soon(self._deliver, observer, inbox)

    def dispatch(self, event: Event) -> None:
        """Hand `event` to every observer without waiting for any of them."""
        for index, (observer, inbox) in enumerate(self._inboxes):
            if inbox.put(event):
                if self._lagging:
                    self._lagging.discard(index)
            elif index not in self._lagging:  # say so once per stretch of lag, not per event
                self._lagging.add(index)
                self._report(
                    ErrorEvent(
                        source=f"observer:{observer_name(observer)}",
                        message=(
                            f"observer is {self._buffer} events behind; events are dropped for it until it catches up"
                        ),
                    )
                )

    def close(self) -> None:
        for _, inbox in self._inboxes:
            inbox.close()

    async def _deliver(self, observer: Observer, inbox: _Inbox) -> None:
        name = observer_name(observer)
        handled = 0
        while True:
            while inbox.items:
                event = inbox.items.popleft()
                try:
                    result = observer.on_event(event)
                    if inspect.isawaitable(result):
                        await result
                except Exception as e:  # noqa: BLE001 - isolated: reported, and the observer keeps getting events
                    log.warning("observer %s failed on %s: %s", name, type(event).__name__, e)
                    self._report(ErrorEvent(source=f"observer:{name}", message=f"{type(e).__name__}: {e}"))
                handled += 1
                if handled % 100 == 0:
                    await anyio.lowlevel.checkpoint()  # fair to the reader and the other observers
            if inbox.closed:
                return
            inbox.ready = anyio.Event()
            await inbox.ready.wait()
