"""Primary and sidecar engines. The primary is the long-lived conversation; the sidecar answers quick
stateless questions: one warm claude is kept ready, used for one question, and replaced in the
background, so no question sees another's context and none waits for a cold start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from ._engine import Engine
from ._events import AssistantMessage, ErrorEvent, ProcessExit, Result
from ._options import EngineOptions
from ._session import Session
from .exceptions import EngineError, SessionClosedError
from .settings import EngineSettings


@dataclass
class _Warm:
    engine: Engine
    used: anyio.Event = field(default_factory=anyio.Event)


class Sidecar:
    """`warm` engines are kept ready, so questions asked close together (recall's and suggest's in the
    memory loop) each find one warm instead of waiting for a cold start."""

    def __init__(self, options: EngineOptions, settings: EngineSettings | None = None, *, timeout: float = 300,
                 warm: int = 1) -> None:
        self.options = options
        self.settings = settings
        self.timeout = timeout
        self.warm = max(warm, 1)
        self.answered = 0
        self._ready_in, self._ready_out = anyio.create_memory_object_stream[_Warm | BaseException](math.inf)
        self._lock = anyio.Lock()
        self._closed = False

    async def keep_warm(self) -> None:
        """Runs in the pool's task group: each engine lives in this task, from start to close."""
        while not self._closed:
            try:
                async with Engine(self.options, self.settings) as engine:
                    await engine.start()
                    warm = _Warm(engine)
                    self._ready_in.send_nowait(warm)
                    await warm.used.wait()
            except EngineError as e:
                self._ready_in.send_nowait(e)
                await anyio.sleep(1)  # do not spin on a claude that cannot start

    async def ask(self, prompt: str) -> str:
        """One question, one answer (the text of the reply), on a fresh context."""
        if self._closed:
            raise SessionClosedError("the sidecar is closed")
        with anyio.fail_after(self.timeout):
            async with self._lock:  # one warm engine per question, taken in turn; the questions run at once
                warm = await self._ready_out.receive()
            if isinstance(warm, BaseException):
                raise EngineError(f"the sidecar's claude could not start: {warm}") from warm
            try:
                return await self._ask(warm.engine, prompt)
            finally:
                warm.used.set()  # this engine is closed and replaced in the background

    async def _ask(self, engine: Engine, prompt: str) -> str:
        await engine.send(prompt)
        texts: list[str] = []
        async for event in engine.events():
            if isinstance(event, AssistantMessage) and not event.parent_tool_use_id:
                texts.append(event.text)
            elif isinstance(event, Result):
                if event.is_error:
                    raise EngineError(f"the sidecar's answer failed: {event.result}")
                self.answered += 1
                return "".join(texts)
            elif isinstance(event, ProcessExit) or isinstance(event, ErrorEvent) and event.source == "process":
                raise EngineError(f"the sidecar's claude stopped: {event}")
        raise EngineError("the sidecar's claude stopped before answering")

    def close(self) -> None:
        self._closed = True


class EnginePool:
    """`async with EnginePool(primary_options, sidecar_options) as pool:` gives `pool.primary`
    (a Session) and `pool.sidecar` (a Sidecar with `ask()`)."""

    def __init__(self, primary: EngineOptions, sidecar: EngineOptions | None = None, *,
                 settings: EngineSettings | None = None, sidecars: int = 1, **session_kwargs: object) -> None:
        self.primary = Session(primary, settings=settings, **session_kwargs)  # type: ignore[arg-type]
        self.sidecar = Sidecar(sidecar or primary, settings, warm=sidecars)
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> EnginePool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for _ in range(self.sidecar.warm):
            self._tg.start_soon(self.sidecar.keep_warm)
        try:
            await self.primary.__aenter__()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sidecar.close()
        try:
            if self.primary.state.value == "running":
                await self.primary.__aexit__(None, None, None)
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
