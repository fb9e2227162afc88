"""Primary and sidecar engines. The primary is the long-lived conversation; the sidecar answers quick
stateless questions on a few long-lived claudes: each question takes an idle one, and `/clear` after the
answer gives the next question a fresh context without a cold start (a fresh claude's first answer costs
about a second of start-up, a cleared one's a turn: ~70 ms against the scripted model).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Unpack

import anyio
from anyio.abc import TaskGroup
from opentelemetry import context as otel_context
from opentelemetry import trace

from ._engine import Engine
from ._events import AssistantMessage, ErrorEvent, ProcessExit, Result
from ._options import EngineOptions
from ._session import Session, SessionOptions
from ._spare import CLEAR, WarmSpare
from .exceptions import EngineError, SessionClosedError
from .settings import EngineSettings

log = logging.getLogger("frobozz.engine")

# The clear waits this long after an answer, so that it does not compete for the CPU with what the caller
# does with the answer at once (the memory loop's searches with the sidecar's queries: 39 ms instead of
# 61 ms p50 at 100k memories on two cores); a question asked meanwhile takes another warm engine.
CLEAR_AFTER = 0.3


@dataclass
class _Idle:
    """One warm engine lent to one question; `clean` says the answer came and the engine can be cleared."""

    engine: Engine
    returned: anyio.Event = field(default_factory=anyio.Event)
    clean: bool = False
    taken: bool = False  # a question has it


class Sidecar:
    """`warm` engines are kept ready, so questions asked close together (recall's and suggest's in the
    memory loop) run side by side. An engine is replaced when a question fails on it, and after `reuse`
    questions, so no claude lives for ever."""

    def __init__(
        self,
        options: EngineOptions,
        settings: EngineSettings | None = None,
        *,
        timeout: float = 300,
        warm: int = 1,
        reuse: int = 100,
        clear_after: float = CLEAR_AFTER,
    ) -> None:
        self.options = options
        self.settings = settings
        self.timeout = timeout
        self.warm = max(warm, 1)
        self.reuse = max(reuse, 1)
        self.clear_after = clear_after
        self.answered = 0
        self.started = 0
        self._ready_in, self._ready_out = anyio.create_memory_object_stream[_Idle | BaseException](math.inf)
        self._lock = anyio.Lock()
        self._closed = False

    async def keep_warm(self) -> None:
        """Runs in the pool's task group: each engine lives in this task, lent out and cleared in turn."""
        while not self._closed:
            try:
                async with Engine(self.options, self.settings) as engine:
                    await engine.start(one_session=False)  # `/clear`ed between questions
                    self.started += 1
                    await self._lend(engine)
            except EngineError as e:
                self._ready_in.send_nowait(e)
                await anyio.sleep(1)  # do not spin on a claude that cannot start

    async def _lend(self, engine: Engine) -> None:
        for _ in range(self.reuse):
            idle = _Idle(engine)
            self._ready_in.send_nowait(idle)
            try:
                await idle.returned.wait()
            finally:
                if idle.taken and not idle.clean:  # failed or given up mid-answer (or the pool closes meanwhile):
                    with anyio.CancelScope(shield=True):  # nobody waits for that turn, and a close would wait
                        await engine.close(finish=False)  # for it (a slow answer held a chat's exit up 10 s)
            if not idle.clean or self._closed:
                return
            try:
                await anyio.sleep(self.clear_after)  # the caller's own work on the answer goes first
                with anyio.fail_after(self.timeout):
                    await self._ask(engine, CLEAR)
            except (EngineError, TimeoutError) as e:
                log.warning("the sidecar's claude did not clear (%s); a new one starts", e)
                return

    async def ask(self, prompt: str) -> str:
        """One question, one answer (the text of the reply), on a fresh context."""
        if self._closed:
            raise SessionClosedError("the sidecar is closed")
        with anyio.fail_after(self.timeout):
            async with self._lock:  # one warm engine per question, taken in turn; the questions run at once
                idle = await self._ready_out.receive()
            if isinstance(idle, BaseException):
                raise EngineError(f"the sidecar's claude could not start: {idle}") from idle
            idle.taken = True
            try:
                answer = await self._ask(idle.engine, prompt)
                idle.clean = True
                self.answered += 1
                return answer
            finally:
                idle.returned.set()  # cleared and lent again, or closed and replaced, in the background

    async def _ask(self, engine: Engine, prompt: str) -> str:
        if trace.get_current_span().is_recording():  # asked inside a span (recall's): the answer's turn is in it
            engine.trace.prepare_turn(otel_context.get_current())
        await engine.send(prompt)
        texts: list[str] = []
        async for event in engine.events():
            if isinstance(event, AssistantMessage) and not event.parent_tool_use_id:
                texts.append(event.text)
            elif isinstance(event, Result):
                if event.is_error:
                    raise EngineError(f"the sidecar's answer failed: {event.result}")
                return "".join(texts)
            elif isinstance(event, ProcessExit) or (isinstance(event, ErrorEvent) and event.source == "process"):
                raise EngineError(f"the sidecar's claude stopped: {event}")
        raise EngineError("the sidecar's claude stopped before answering")

    def close(self) -> None:
        self._closed = True


class EnginePool:
    """`async with EnginePool(primary_options, sidecar_options) as pool:` gives `pool.primary`
    (a Session) and `pool.sidecar` (a Sidecar with `ask()`)."""

    def __init__(
        self,
        primary: EngineOptions,
        sidecar: EngineOptions | None = None,
        *,
        settings: EngineSettings | None = None,
        sidecars: int = 1,
        spare: WarmSpare | None = None,
        shared_sidecar: Sidecar | None = None,
        **session_kwargs: Unpack[SessionOptions],
    ) -> None:
        """`spare`: the primary takes over its claude when it was started for such options (a new session).
        `shared_sidecar`: one kept warm by the caller across pools (neither started nor closed here)."""
        self.primary = Session(primary, settings=settings, spare=spare, **session_kwargs)
        self.sidecar = shared_sidecar or Sidecar(sidecar or primary, settings, warm=sidecars)
        self._own_sidecar = shared_sidecar is None
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> EnginePool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for _ in range(self.sidecar.warm if self._own_sidecar else 0):
            self._tg.start_soon(self.sidecar.keep_warm)
        try:
            await self.primary.__aenter__()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._own_sidecar:
            self.sidecar.close()
        try:
            if self.primary.state.value == "running":
                await self.primary.__aexit__(None, None, None)
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
