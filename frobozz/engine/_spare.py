"""A warm spare: the next claude, started ahead of need (as the TypeScript Agent SDK's `startup()` does), so a
new session's first answer does not wait for claude to start (seconds; the spare's first answer waits only
for the turn).

`async with WarmSpare() as spare:` then `spare.prime(options)` starts one in the background; a session made
with those options (`Session(options, spare=spare)`, `started(options, spare=spare)`) takes it over, and the
next one starts behind it. Options match when they launch the same claude (program, arguments, environment,
folder, account, hooks and agents sent at start); what is only the engine's (the permission callback, the
hooks' functions, the stderr callback, the transcript store's project) follows the taker's. A spare lives in
the spare's own task group, dies with its parent like every claude the engine starts, and is closed with it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from ._engine import Engine, EngineState
from ._events import ProcessExit, Result
from ._hooks import HookRegistry
from ._options import EngineOptions, find_claude
from ._transcripts import config_dir, transcript_path
from .exceptions import EngineError
from .settings import EngineSettings

log = logging.getLogger("frobozz.engine")

RETRY = 5.0  # seconds before another try after a spare failed to start: a claude that cannot start must not spin
CLEAR = "/clear"  # claude's own command: a new session, no history, the same process (answered without the API)
REHEARSAL = "(a rehearsal of a first turn, answered by the engine: nobody is waiting for it)"


def launch_key(options: EngineOptions, settings: EngineSettings | None = None) -> str | None:
    """What decides which claude `options` start, as one string; None when a spare cannot serve them (a
    resumed, continued or named session, or in-process servers, which are served to one claude only)."""
    if options.in_process_servers or options.session_id or options.continue_conversation:
        return None
    settings = settings or EngineSettings()
    try:
        program = find_claude(options.cli_path or settings.claude_path)
        arguments = options.arguments(resume=None)
    except (EngineError, ValueError):
        return None
    return json.dumps(
        {
            "program": program,
            "arguments": arguments,
            "env": sorted({**options.child_env(), **options.env}.items()),
            "cwd": os.path.abspath(options.cwd or os.getcwd()),
            "user": options.user,
            "group": options.group,
            "proxy": options.proxy,
            "hooks": HookRegistry(options.hooks).config(),
            "agents": options.agents,
            "stderr": options.stderr is not None,
            "store": None if options.session_store is None else id(options.session_store),
            "partial": options.include_partial_messages,
        },
        default=str,
        sort_keys=True,
    )


class WarmSpare:
    """One claude kept started for the options last primed (`room`, when given, is asked before each start:
    a bound on live claudes counts the spare too)."""

    def __init__(self, settings: EngineSettings | None = None, *, room: Callable[[], bool] | None = None) -> None:
        self.settings = settings or EngineSettings()
        self.room = room
        self.started = 0  # spares started, and taken over by a session
        self.taken = 0
        self._options: EngineOptions | None = None
        self._key: str | None = None
        self._ready: Engine | None = None
        # the claude starting now: its start's number and its generation (a dropped generation's will not serve)
        self._starting: tuple[int, int] | None = None
        self._starts = 0
        self._alive = 0  # spare claudes not yet closed (starting, waiting, or dropped and closing), never taken ones
        self._generation = 0  # `drop` makes a new one: a spare of an older one is closed as soon as it has started
        self._changed = anyio.Event()  # set (and renewed) whenever a spare is ready, or a start has ended
        self._taken: set[int] = set()  # ids of engines taken over and not yet given back
        self._released: dict[int, anyio.Event] = {}  # engine id -> set when its keeper may close it
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> WarmSpare:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._options = self._key = None
        try:
            self.drop()
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()  # a spare still starting is closed by its Engine's own exit
            await self._tg.__aexit__(None, None, None)
            self._tg = None

    @property
    def live(self) -> int:
        """Claude processes the spare holds now: starting, waiting, or dropped and not yet closed (0 or 1: the
        next starts only once the last is gone)."""
        return self._alive

    async def clear(self) -> None:
        """Drop the spare and wait until its claude has exited: room for another, under a bound on claudes."""
        self.drop()
        while self._alive:
            await self._changed.wait()

    async def wait_ready(self) -> None:
        """Until a spare is started and waiting (after `prime`)."""
        while self._ready is None:
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def prime(self, options: EngineOptions) -> None:
        """Keep a claude started for `options` (one started for other options is closed)."""
        key = launch_key(options, self.settings)
        if key is None or self._tg is None:
            return
        if key != self._key:
            self._options, self._key = options, key
            self.drop()
        self._refill()

    def drop(self) -> None:
        """Close the spare, waiting or still starting (to make room, or because it was primed for other
        options); the next starts when there is room, or at the next `prime`."""
        self._generation += 1
        engine, self._ready = self._ready, None
        if engine is not None:
            self._released[id(engine)].set()

    def fits(self, options: EngineOptions) -> bool:
        """Whether the spare (waiting, or still starting) would serve `options`."""
        key = launch_key(options, self.settings)
        return key is not None and key == self._key and (self._ready is not None or self._starting_now())

    def _starting_now(self) -> bool:
        """A claude is starting for the options primed now (one started before the last `drop` will not serve)."""
        return self._starting is not None and self._starting[1] == self._generation

    async def take(self, options: EngineOptions) -> Engine | None:
        """The started spare, now serving `options`, when it was started for options that launch the same
        claude (one still starting is waited for: it is nearer than a new one); else None, and the next spare
        starts for `options`. Give it back with `give_back`."""
        key = launch_key(options, self.settings)
        while key is not None and key == self._key and self._ready is None and self._starting_now():
            await self._changed.wait()
        engine = self._ready
        if key is None or engine is None or key != self._key or engine.state is not EngineState.RUNNING:
            if key is not None:
                self.prime(options)
            return None
        self._ready = None
        self._alive -= 1  # the taker's now: its session counts it
        self._taken.add(id(engine))
        engine.take_over(options)
        self.taken += 1
        self._refill()
        return engine

    async def give_back(self, engine: Engine) -> None:
        """The taker is done: close the claude, and let its keeper task end. Not shielded: the keeper owns the
        engine, so a taker cancelled mid-close leaves the rest of the close to it (and to the spare's exit, which
        kills a claude whose close does not end), where a shield here would hold the taker for as long."""
        try:
            await engine.close()
        finally:
            released = self._released.get(id(engine))
            if released is not None:
                released.set()

    def _refill(self) -> None:
        if self._tg is None or self._options is None or self._alive:
            return
        if self.room is not None and not self.room():
            return
        self._starts += 1
        start = self._starting = (self._starts, self._generation)
        self._alive += 1
        self._tg.start_soon(self._keep, self._options, self._key, start)

    def _done_starting(self, start: tuple[int, int]) -> None:
        if self._starting == start:
            self._starting = None

    async def _keep(self, options: EngineOptions, key: str | None, start: tuple[int, int]) -> None:
        """One spare's life: started here, waiting, taken (then closed by its taker) or dropped, then gone."""
        released = anyio.Event()
        failed = taken = False
        try:
            async with Engine(options, self.settings) as engine:
                self._released[id(engine)] = released
                try:
                    await engine.start(mirror=False)
                    await _rehearse(engine, self.settings.control_timeout)
                    self.started += 1
                    if key == self._key and start[1] == self._generation:
                        self._ready = engine
                    else:  # dropped, or primed for other options, while it started
                        released.set()
                finally:
                    self._done_starting(start)
                    self._notify()
                await released.wait()
                self._released.pop(id(engine), None)
                taken = id(engine) in self._taken
                self._taken.discard(id(engine))
        except EngineError as e:
            log.warning("the warm spare claude did not start: %s", e)
            failed = True
        finally:
            self._done_starting(start)  # (not the next spare's mark: a taken one's keeper ends long after)
            if not taken:
                self._alive -= 1
            self._notify()
        if failed:
            await anyio.sleep(RETRY)
        self._refill()


async def _rehearse(engine: Engine, timeout: float) -> None:  # noqa: ASYNC109 - a spare that is slow is dropped
    """A session's first turn, done ahead of need, then `/clear` (claude's own command: a new session, no
    history kept), so that what claude does on a session's first message (its tools, its system prompt, its
    first model request: about half of a warm start) is done before anyone waits for it. The rehearsal's
    model request is answered by the engine's proxy (no tokens, nothing sent to the API; without a proxy, or
    with `rehearse_first_turn` off, or when claude's settings files or plugins have hooks, which would see the
    turn, only `/clear` is rehearsed), no hook of the options is called, and its transcript is removed. Its
    events are read here: the taker sees none of them."""
    rehearsed: Result | None = None
    try:
        answered_here = engine.rehearse()  # until a session takes it: nothing it sends meanwhile goes out
        with anyio.fail_after(timeout):
            turn = answered_here and engine.settings.rehearse_first_turn
            if turn and not await anyio.to_thread.run_sync(_hooks_beyond_the_engine, engine):
                rehearsed = await _turn(engine, REHEARSAL)
            cleared = await _turn(engine, CLEAR)
    except TimeoutError:
        raise EngineError(f"the spare's claude did not finish its rehearsal within {timeout:g} s") from None
    if rehearsed is not None and rehearsed.is_error:
        log.info("the spare's rehearsed first turn failed (%.200s): only /clear was rehearsed", rehearsed.result)
    if rehearsed is not None and rehearsed.session_id and rehearsed.session_id != cleared.session_id:
        _forget(rehearsed.session_id, engine)  # (a session the /clear did not end is the taker's: kept)


MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")


def _hooks_beyond_the_engine(engine: Engine) -> bool:
    """Whether claude could run hooks the engine does not answer (its settings files' or a plugin's): they would
    see a rehearsed turn as a real one (a memory plugin would keep it), so then only `/clear` is rehearsed. A
    settings file that cannot be read counts as having hooks."""
    options = engine.options
    if options.plugins:
        return True
    sources = ("user", "project", "local") if options.setting_sources is None else tuple(options.setting_sources)
    files = [MANAGED_SETTINGS]
    files += [config_dir(engine.env) / "settings.json"] if "user" in sources else []
    files += [engine.cwd / ".claude" / "settings.json"] if "project" in sources else []
    files += [engine.cwd / ".claude" / "settings.local.json"] if "local" in sources else []
    for path in files:
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return True
        if not isinstance(settings, dict):
            return True
        if settings.get("hooks") or any((settings.get("enabledPlugins") or {}).values()):
            return True
    return False


async def _turn(engine: Engine, content: str) -> Result:
    await engine.send(content)
    async for event in engine.events():
        if isinstance(event, Result):
            return event
        if isinstance(event, ProcessExit):
            break
    raise EngineError("the spare's claude stopped before it was ready")


def _forget(session_id: str, engine: Engine) -> None:
    """The rehearsal's transcript is nobody's session: gone, so that no list or `--continue` finds it."""
    try:
        transcript_path(session_id, engine.cwd, engine.env).unlink(missing_ok=True)
    except (EngineError, OSError) as e:
        log.warning("the spare's rehearsal transcript was not removed: %s", e)


@asynccontextmanager
async def started(
    options: EngineOptions,
    settings: EngineSettings | None = None,
    *,
    spare: WarmSpare | None = None,
    resume: str | None = None,
) -> AsyncIterator[Engine]:
    """A started engine for `options`: the spare's when it fits (a new session), else one started now."""
    engine = await spare.take(options) if spare is not None and resume is None else None
    if engine is None:
        async with Engine(options, settings) as engine:
            await engine.start(resume)
            yield engine
        return
    try:
        yield engine
    finally:
        assert spare is not None
        await spare.give_back(engine)
