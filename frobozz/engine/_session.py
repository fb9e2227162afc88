"""Session: the duplex channel. Producers `send()` onto a queue; one driver feeds claude one turn at
a time; the router fans every event out to observers and to the consumer's `events()`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from enum import Enum
from typing import Any, Protocol, TypedDict

import anyio
from anyio.abc import TaskGroup

from ._engine import Engine, EngineState
from ._events import ErrorEvent, Event, McpServerStatus, ProcessExit, Restarted, Result
from ._options import EngineOptions
from ._router import Observer, Router, observer_name
from ._spare import WarmSpare
from .exceptions import EngineError, SessionClosedError
from .settings import EngineSettings

log = logging.getLogger("frobozz.engine.session")
Content = str | list[dict[str, Any]]


class Producer(Protocol):
    """Puts messages on a session's queue with `await session.send(...)`."""

    def run(self, session: Session) -> Awaitable[None]: ...


class SessionOptions(TypedDict, total=False):
    """A Session's own arguments, as EnginePool passes them on."""

    producers: Sequence[Producer]
    observers: Sequence[Observer]
    resume: str | None
    consume: bool


class SessionState(Enum):
    """A Session's life: not started, running, closed."""

    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class Session:
    """`async with Session(options, producers=[...], observers=[...]) as session:`"""

    def __init__(
        self,
        options: EngineOptions | None = None,
        *,
        producers: Sequence[Producer] = (),
        observers: Sequence[Observer] = (),
        resume: str | None = None,
        consume: bool = True,
        settings: EngineSettings | None = None,
        spare: WarmSpare | None = None,
    ) -> None:
        """`spare`: a new session (no `resume`) takes over its claude when it was started for such options."""
        self.engine = Engine(options, settings)
        self.spare = spare
        self._taken = False
        self.producers = list(producers)
        self.router = Router(observers, report=self._report)
        self.resume = resume
        self.state = SessionState.NEW
        self.turns_completed = 0
        self._queue_in, self._queue_out = anyio.create_memory_object_stream[Content](math.inf)
        self._consumer_in, self._consumer_out = anyio.create_memory_object_stream[Event](math.inf if consume else 0)
        self._consume = consume
        self._turn_done = anyio.Event()
        self._turn_outcome = ""
        self._idle = anyio.Event()
        self._idle.set()
        self._pending = 0
        self._tg: TaskGroup | None = None

    @property
    def session_id(self) -> str | None:
        return self.engine.session_id

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Session:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            taken = (
                await self.spare.take(self.engine.options) if self.spare is not None and self.resume is None else None
            )
            if taken is not None:
                self.engine, self._taken = taken, True
            else:
                await self.engine.__aenter__()
            self.router.start(self._tg)
            self._tg.start_soon(self._route)
            if not self._taken:
                await self.engine.start(self.resume)
            self._tg.start_soon(self._drive)
            for producer in self.producers:
                self._tg.start_soon(self._produce, producer)
            self.state = SessionState.RUNNING
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.state = SessionState.CLOSED
        self._queue_in.close()
        try:
            if self._taken:
                assert self.spare is not None
                await self.spare.give_back(self.engine)
            else:
                await self.engine.__aexit__(None, None, None)  # shields its own process shutdown
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self.router.close()
            self._consumer_in.close()

    # -- the public channel ----------------------------------------------------------------------
    async def send(self, content: Content) -> None:
        """Queue a user message (fire and forget). Several producers may send at once."""
        if self.state is SessionState.CLOSED:
            raise SessionClosedError("the session is closed")
        self._pending += 1
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._queue_in.send_nowait(content)

    async def events(self) -> AsyncIterator[Event]:
        """Every event, in order: replayed history first, then the live stream."""
        if not self._consume:
            raise EngineError("this session was made with consume=False: watch it with an observer")
        async for event in self._consumer_out:
            yield event

    async def wait_idle(self) -> None:
        """Until every queued message has had its turn."""
        await self._idle.wait()

    async def interrupt(self) -> None:
        await self.engine.interrupt()

    async def wait_for_mcp(
        self,
        names: Iterable[str] | None = None,
        *,
        timeout: float = 120,  # noqa: ASYNC109 - Engine.wait_for_mcp's
    ) -> tuple[McpServerStatus, ...]:
        """Until claude has started the MCP servers (see `Engine.wait_for_mcp`): before a turn that needs them."""
        return await self.engine.wait_for_mcp(names, timeout=timeout)

    # -- inside ---------------------------------------------------------------------------------
    def _report(self, event: Event) -> None:
        """Events made by the session itself (observer failures): to the consumer only."""
        if self._consume:
            try:
                self._consumer_in.send_nowait(event)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

    async def _route(self) -> None:
        async for event in self.engine.events():
            self._track(event)
            self.router.dispatch(event)
            if self._consume:
                try:
                    self._consumer_in.send_nowait(event)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass
        self._finish_turn("closed")  # the engine's stream ended: no turn can complete any more

    def _track(self, event: Event) -> None:
        if isinstance(event, Result) and not event.is_replay:
            self.turns_completed += 1
            self._finish_turn("result")
        elif isinstance(event, Restarted):
            self._finish_turn("restarted")
        elif isinstance(event, ProcessExit) and self.engine.state is EngineState.FAILED:
            self._finish_turn("closed")

    def _finish_turn(self, outcome: str) -> None:
        self._turn_outcome = outcome
        self._turn_done.set()

    async def _drive(self) -> None:
        """One message at a time: send it, wait for its result; after a restart, send it again."""
        try:
            await self._drive_turns()
        finally:
            self._idle.set()  # nothing more will be answered: nobody may wait for it

    async def _drive_turns(self) -> None:
        async for content in self._queue_out:
            while True:
                self._turn_done = anyio.Event()
                try:
                    await self.engine.send(content)
                except EngineError as e:
                    if self.engine.state is not EngineState.RESTARTING:
                        log.warning("message not sent: %s", e)
                        self._report(ErrorEvent(source="session", message=f"message not sent: {e}"))
                        return
                await self._turn_done.wait()
                if self._turn_outcome != "restarted":
                    break
            self._pending -= 1
            if self._pending == 0:
                self._idle.set()
            if self._turn_outcome == "closed":
                return

    async def _produce(self, producer: Producer) -> None:
        try:
            await producer.run(self)
        except SessionClosedError:
            pass
        except Exception as e:  # noqa: BLE001 - a producer that fails is reported; the session goes on
            log.warning("producer %s failed: %s", observer_name(producer), e)
            self._report(ErrorEvent(source=f"producer:{observer_name(producer)}", message=f"{type(e).__name__}: {e}"))
