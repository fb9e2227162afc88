"""What a worker keeps started between firings, so a firing's first model request does not wait for claude:
a warm spare (the engine's `WarmSpare`) per routine about to fire (an inbox's or a feed's once it could be
read, a schedule's when its due time is near), the memory loop's sidecar claudes shared by every firing of one
model, and the embedding model loaded once in the worker. A firing takes its routine's spare and the next one
starts behind it. At most `routine_warm` routines hold a spare; the one primed longest ago gives its up first."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup, TaskStatus

from frobozz.engine import Sidecar, WarmSpare
from frobozz.memory import MemoryService

from ._fire import primary_options, sidecar_options, workspace
from ._spec import Routine
from .settings import RoutineSettings

log = logging.getLogger("frobozz.routines")
# Every firing of one model asks these, up to `routine_concurrency` firings at once: two, so that one firing's
# suggestions seldom wait behind another's. (A firing without the worker's claudes starts one of its own when
# recall asks nothing: `MemorySession.sidecars`.)
SIDECARS = 2


@dataclass
class _Held:
    spare: WarmSpare
    done: anyio.Event = field(default_factory=anyio.Event)  # set: the spare is closed (its claude, waiting, too)
    users: int = 0  # firings holding a claude taken from it (closing the spare would close theirs)
    gone: bool = False  # let go: closed once its last firing has given its claude back


class Warm:
    """`async with Warm(settings, memory) as warm:` then `warm.prime(spec)`; a firing asks `warm.spare(name)` and
        `warm.sidecar(spec)`; a firing leases its routine's spare (`async with warm.lease(name) as spare:`), so that
    letting a spare go (paused, removed, or the least recently primed) never closes a claude a firing took from it."""

    def __init__(self, settings: RoutineSettings, memory: MemoryService, *, cli_path: str | None = None) -> None:
        self.settings, self.memory, self.cli_path = settings, memory, cli_path
        self._spares: OrderedDict[str, _Held] = OrderedDict()
        self._sidecars: dict[str | None, Sidecar] = {}
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> Warm:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._embedder)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._tg is not None
        for held in self._spares.values():
            held.done.set()
        for sidecar in self._sidecars.values():
            sidecar.close()
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._tg = None
        self._spares.clear()
        self._sidecars.clear()

    async def _embedder(self) -> None:
        """Loaded once here, not in a firing's first recall (seconds)."""
        try:
            store = await self.memory.store()
            await store.embedder.embed(["warming up"])
        except Exception as e:  # noqa: BLE001 - the firings' recall reports it on its own
            log.warning("routines: the embedding model did not load ahead of need: %s", type(e).__name__)

    async def prime(self, spec: Routine) -> None:
        """Keep a claude started for `spec`'s next firing, and the sidecars its memory loop asks."""
        if self._tg is None or spec.game or self.settings.routine_warm < 1:
            return  # a --game firing is the runner's run, which starts its own claude
        self.sidecar(spec)
        try:
            workspace(spec, self.settings).mkdir(parents=True, exist_ok=True)  # primary_options' cwd
        except OSError as e:  # only a head start: the firing fails on it, and says so (an OSError raised here
            log.warning("routine %s: its claude is not started ahead: %s", spec.name, e)  # was the database's)
            return
        held = self._spares.get(spec.name)
        if held is None:
            while len(self._spares) >= self.settings.routine_warm:
                _, oldest = self._spares.popitem(last=False)
                self._let_go(oldest)
            held = _Held(WarmSpare())
            await self._tg.start(self._hold, held)
            self._spares[spec.name] = held
        self._spares.move_to_end(spec.name)
        held.spare.prime(primary_options(spec, self.settings, self.cli_path))

    async def _hold(self, held: _Held, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with held.spare:  # entered and left in one task, as its task group wants
            task_status.started()
            await held.done.wait()

    def keep_only(self, names: set[str]) -> None:
        """Let the spares of routines no longer active (paused, removed) go."""
        for name in set(self._spares) - names:
            self._let_go(self._spares.pop(name))

    @staticmethod
    def _let_go(held: _Held) -> None:
        held.gone = True
        held.spare.drop()  # its waiting claude now; the spare itself once no firing holds one of its claudes
        if not held.users:
            held.done.set()

    @asynccontextmanager
    async def lease(self, name: str) -> AsyncIterator[WarmSpare | None]:
        """The routine's spare for one firing (None when it has none): it is not closed until the firing ends."""
        held = self._spares.get(name)
        if held is None or held.gone:
            yield None
            return
        held.users += 1
        try:
            yield held.spare
        finally:
            held.users -= 1
            if held.gone and not held.users:
                held.done.set()

    def sidecar(self, spec: Routine) -> Sidecar | None:
        if self._tg is None or self.settings.routine_warm < 1:
            return None
        sidecar = self._sidecars.get(spec.model)
        if sidecar is None:
            self.settings.routines_dir.mkdir(parents=True, exist_ok=True)
            sidecar = self._sidecars[spec.model] = Sidecar(
                sidecar_options(spec, self.settings, self.cli_path), warm=SIDECARS
            )
            for _ in range(SIDECARS):
                self._tg.start_soon(sidecar.keep_warm)
        return sidecar
