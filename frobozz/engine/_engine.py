"""Engine: one claude process as a stream of typed events, with its control channel and proxy.

`async with Engine(options) as engine: await engine.start()` spawns claude; `send()` writes a
user message; `events()` yields everything claude says, plus what the engine notices (bad lines,
API errors, usage from the proxy, exits, restarts). A crash restarts claude with `--resume` of the
same session, up to `max_restarts` times; the events say so. A claude that exits as it starts because it read
its own config file half-written (claude writes it in place, so a start beside another in the same HOME can)
is started again, up to `max_restarts` more times (not counted in `restarts`).

This module keeps the lifecycle (start, spawn, take over, close, the restart after a crash) and the talking
(send, events, interrupt). Claude's stdout is read in `_reader.py`; the control requests passed through as
methods (`mcp_status`, `wait_for_mcp`, `set_model`, …) are in `_control_requests.py`; a session store's resume
and mirror in `_store_link.py`.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import AsyncIterator
from enum import Enum
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .. import _spans
from .._accounts import AccountError, account
from . import _reader, _transcripts
from ._control import ControlChannel
from ._control_requests import ControlRequests
from ._events import ErrorEvent, Event, Restarted, Usage
from ._hooks import HookRegistry, QuietHooks
from ._inprocess import InProcessServers
from ._options import EngineOptions, find_claude
from ._process import CLIProcess
from ._proxy import Proxy, Rewrite
from ._store_link import StoreLink
from ._tracing import EngineTrace, claude_resource
from .exceptions import EngineError, ProcessError, SessionClosedError
from .settings import EngineSettings

log = logging.getLogger("frobozz.engine")
CONFIG_FILE = ".claude.json"  # claude's own, written in place (anthropics/claude-code#65335)


class EngineState(Enum):
    """Where an engine's claude is: not started, running, being restarted after a crash, closed, or given up on."""

    NEW = "new"
    RUNNING = "running"
    RESTARTING = "restarting"
    CLOSED = "closed"
    FAILED = "failed"


class Engine(ControlRequests):
    """One claude process and its session: start or resume it, send turns, read typed events, answer its
    control requests; restarted on the same session if it dies. `Session` adds the queue and the router."""

    def __init__(self, options: EngineOptions | None = None, settings: EngineSettings | None = None) -> None:
        self.options = options or EngineOptions()
        self.settings = settings or EngineSettings()
        self.state = EngineState.NEW
        self.session_id: str | None = None
        self.in_process_failed: dict[str, Exception] = {}  # in-process servers that could not be made, and why
        self.init_response: dict[str, Any] = {}
        self.restarts = 0
        self.cwd = Path(self.options.cwd or os.getcwd())
        self.env = self._child_env()
        try:
            self._account = account(self.options.user, self.options.group)
        except AccountError as e:
            raise EngineError(f"cannot run claude as that account: {e}") from e
        self._process: CLIProcess | None = None
        self._spawned: list[CLIProcess] = []  # the claudes this engine started and may not have ended
        self._control: ControlChannel | None = None
        self._hooks = HookRegistry(self.options.hooks)
        self._servers_scope: anyio.CancelScope | None = None
        self._proxy: Proxy | None = None
        self._tg: TaskGroup | None = None
        self._closing = False
        self._send_events: MemoryObjectSendStream[Event]
        self._events: MemoryObjectReceiveStream[Event]
        self._send_events, self._events = anyio.create_memory_object_stream[Event](self.options.event_buffer)
        self._reader_done = anyio.Event()
        self._store = StoreLink(self._send_events)  # a session store's side: the copy resumed from, the mirror
        self._one_session = True
        self.trace = EngineTrace(
            self.options.trace_attributes,
            cwd=str(self.cwd),
            content=self.settings.trace_content_max if self.settings.trace_content else None,
        )

    def _child_env(self) -> dict[str, str]:
        env = {**os.environ, **self.options.child_env(), **self.options.env}
        env.pop("CLAUDECODE", None)  # a claude inside a claude session must not think it is nested
        return env

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> Engine:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.close()
        finally:
            self._closing = True  # (a close cancelled before it said so) no claude is started from here on
            self._process = None
            await self._kill_spawned()  # a close that did not end, or a restart it raced with
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            await self._kill_spawned()  # one a cancelled task was starting: claude must not outlive its engine
            self._spawned.clear()

    async def _kill_spawned(self) -> None:
        for process in list(self._spawned):
            process.kill()
            await process.close(1)  # (shielded) reaped

    async def start(self, session_id: str | None = None, *, mirror: bool = True, one_session: bool = True) -> None:
        """Spawn claude. With `session_id`, first replay its transcript as events, then resume it. `mirror=False`:
        nothing is mirrored into the session store, nor traced, until `take_over` (a warm spare's rehearsal is
        nobody's).
        `one_session=False`: this claude will serve many sessions (a pool's, which `/clear`s between them), so
        its own telemetry is not given one session's id as a resource attribute."""
        if self._tg is None:
            raise EngineError("use the engine as `async with Engine(...) as engine`")
        if self.state is not EngineState.NEW:
            raise EngineError(f"the engine is already {self.state.value}")
        if self.options.session_store is not None:
            session_id = await self._store.resume(
                session_id, self.options, cwd=self.cwd, env=self.env, account=self._account
            )
            if mirror:
                self._store.start_mirror(self.options, self.env, self._tg)
        if session_id is not None:
            path = _transcripts.transcript_path(session_id, self.cwd, self.env)
            if not path.is_file():
                raise EngineError(f"no transcript for session {session_id} in {path.parent}")
            for event in _transcripts.replay(path):
                await self._emit(event)
            self.session_id = session_id
        self._one_session = one_session and mirror  # a spare's session is its taker's, made after a /clear
        if mirror:
            self.trace.start()
        else:  # nor traced: its session span and turns are its taker's, from `take_over`
            self.trace.hold()
        if self.options.proxy:
            self._proxy = Proxy(self.env.get("ANTHROPIC_BASE_URL"), self._on_usage, self.trace)
            await self._tg.start(self._proxy.run)
            self.env["ANTHROPIC_BASE_URL"] = self._proxy.url
            if self.trace.recording:  # Frobozz's MCP servers ask here for their call's trace context
                self.env[_spans.TRACE_PARENTS_ENV] = self._proxy.trace_parents_url
        for attempt in range(1, self.options.max_restarts + 2):
            try:
                await self._spawn(resume=session_id)
                break
            except ProcessError as e:
                if attempt > self.options.max_restarts or CONFIG_FILE not in e.stderr or e.exit_code is None:
                    raise
                log.warning(
                    "claude exited as it started, on its config file; starting it again (attempt %d)%s",
                    attempt,
                    _stderr_end(e.stderr),
                )
                await anyio.sleep(0.1 * attempt)  # (the other claude's write takes milliseconds)
        self.state = EngineState.RUNNING

    def take_over(self, options: EngineOptions) -> None:
        """This engine, started ahead of need (a warm spare) with options that launch the same claude, now
        serves `options`: what is the engine's own (the permission callback, the hooks' functions, the stderr
        callback, restarts, the project the transcript is stored under) follows them."""
        if self.state is not EngineState.RUNNING or self._tg is None:
            raise EngineError(f"only a running engine can be taken over; this one is {self.state.value}")
        self.options = options
        self.trace.take_over(options.trace_attributes)  # the taker's session span, linked to the taker's work
        self._hooks = HookRegistry(options.hooks)
        if self._control is not None:  # (a rehearsal's quiet hooks end here)
            self._control.rebind(can_use_tool=options.can_use_tool, hooks=self._hooks)
        if self._proxy is not None:
            self._proxy.rehearsing = False  # the taker's model requests go to the API
        if self._process is not None:
            self._process.tell_stderr_to(options.stderr)
        self.session_id = None  # the taker's session begins with its first message
        if self._store.mirror is not None:
            self._store.mirror.project_key = options.session_project
        elif options.session_store is not None:
            self._store.start_mirror(options, self.env, self._tg)

    def rehearse(self) -> bool:
        """From now until `take_over` (a warm spare's rehearsal, and its wait for a taker): claude's hook
        callbacks get empty answers (no hook of the options is called), and its model requests are answered by
        the engine's own proxy, with no tokens, and sent nowhere. Whether the proxy answers them: not without one."""
        if self._control is not None:
            self._control.rebind(can_use_tool=self.options.can_use_tool, hooks=QuietHooks())
        if self._proxy is not None:
            self._proxy.rehearsing = True
        return self._proxy is not None

    async def _spawn(self, *, resume: str | None) -> None:
        assert self._tg is not None
        command = [
            find_claude(self.options.cli_path or self.settings.claude_path),
            *self.options.arguments(resume=resume),
        ]
        named = self._telemetry_session(resume)
        if named is not None:  # claude's own telemetry, with tracing on: its session's id on its resource
            if resume is None and not self.options.session_id:
                command.append(f"--session-id={named}")  # the id claude would have made up, chosen here first
            claude_resource(self.env, named)
        if self._closing:
            raise SessionClosedError("the engine is closing: claude is not started again")
        process = CLIProcess(
            max_line_bytes=self.settings.max_line_bytes,
            stderr_tail_bytes=self.settings.stderr_tail_bytes,
            on_stderr=self.options.stderr,
        )
        self._spawned[:] = [p for p in self._spawned if p.returncode is None]  # (those that ended need no kill)
        self._spawned.append(process)
        user, group = self._account
        await process.start(command, env=self.env, cwd=self.cwd, task_group=self._tg, user=user, group=group)
        self._process = process
        self._control = ControlChannel(
            process.write,
            can_use_tool=self.options.can_use_tool,
            timeout=self.settings.control_timeout,
            hooks=self._hooks,
            servers=await self._serve_in_process(),
            trace=self.trace,
        )
        settled = anyio.Event()  # this start has succeeded (claude is `_process`) or failed (it is not)
        self._reader_done = anyio.Event()
        self._tg.start_soon(_reader.read, self, process, self._control, settled, self._reader_done)
        try:
            agents: dict[str, Any] = {"agents": dict(self.options.agents)} if self.options.agents else {}
            self.init_response = await self._control.request("initialize", hooks=self._hooks.config(), **agents)
        except EngineError as e:  # (cancelled, it stays `_process`: the engine's exit stops it)
            self._process = None
            await process.close(self.settings.close_timeout)
            raise ProcessError(
                f"claude did not start: {e}{_stderr_end(process.stderr_tail)}",
                exit_code=process.returncode,
                stderr=process.stderr_tail,
            ) from e
        finally:
            settled.set()

    def _telemetry_session(self, resume: str | None) -> str | None:
        """The id of the session this claude is started for, when tracing is on, claude's own telemetry too,
        and the id is known before claude starts (or can be chosen for it): None when it cannot be (a fork's,
        `--continue`'s, a claude that will serve many sessions)."""
        if not (self.trace.on and self._one_session and self.env.get("CLAUDE_CODE_ENABLE_TELEMETRY")):
            return None
        if resume is not None:
            return None if self.options.fork_session else resume
        if self.options.session_id or self.options.continue_conversation:
            return self.options.session_id
        return str(uuid.uuid4())

    async def _serve_in_process(self) -> InProcessServers | None:
        """This claude process's in-process MCP servers, connected afresh (a restarted claude starts their
        sessions again, as it would a subprocess server's). One whose factory fails is left out, as a subprocess
        server that fails to start is: claude says it failed, the others serve, `in_process_failed` says why."""
        if not self.options.in_process_servers:
            return None
        assert self._tg is not None
        if self._servers_scope is not None:
            self._servers_scope.cancel()
        made: dict[str, Any] = {}
        self.in_process_failed = {}
        for name, server in self.options.in_process_servers.items():
            try:
                made[name] = server() if callable(server) else server
            except Exception as e:  # noqa: BLE001 - a server's own settings or setup: reported, the others serve
                self.in_process_failed[name] = e
                first = next(iter(str(e).splitlines()), "")  # (pydantic's says on its next lines: the caller has it)
                log.warning("in-process MCP server %s could not be made: %s: %s", name, type(e).__name__, first)
        servers = InProcessServers(made, self.trace.traceparent)  # (the context is None when not traced)
        scope = anyio.CancelScope()

        async def serve(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await servers.serve(task_status=task_status)

        await self._tg.start(serve)
        self._servers_scope = scope
        return servers

    async def close(self, *, finish: bool = True) -> None:
        """Close stdin and let claude finish; escalate to terminate and kill. Safe to call twice. `finish=False`:
        a turn under way is not waited for (its answer is nobody's now): claude is terminated at once."""
        if self.state in (EngineState.CLOSED, EngineState.FAILED) and self._process is None:
            return
        self._closing = True
        process = self._process
        if process is not None:
            await process.close(self.settings.close_timeout if finish else 0)
            with anyio.move_on_after(5, shield=True):
                await self._reader_done.wait()
        await self._store.close(self.options.session_store_timeout)
        if self._proxy is not None:
            await self._proxy.aclose()
        self.trace.close(error=None if self.state is not EngineState.FAILED else "claude failed")
        self._process = None
        if self.state is not EngineState.FAILED:
            self.state = EngineState.CLOSED
        self._send_events.close()

    # -- talking ----------------------------------------------------------------------------------
    async def send(self, content: str | list[dict[str, Any]]) -> None:
        """Write one user message (text, or a list of content blocks) to claude."""
        if self.state not in (EngineState.RUNNING, EngineState.RESTARTING) or self._process is None:
            raise SessionClosedError(f"the engine is {self.state.value}")
        message = {
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": None,
            "session_id": self.session_id or "default",
        }
        self.trace.begin_turn(content)
        await self._process.write(json.dumps(message))

    async def events(self) -> AsyncIterator[Event]:
        """Everything claude says, and what the engine notices. May be iterated again after a break."""
        try:
            while True:
                yield await self._events.receive()
        except anyio.EndOfStream:
            return

    async def interrupt(self) -> None:
        await self._require_control().request("interrupt")

    # (the other control requests, `mcp_status` to `set_permission_mode`, are ControlRequests': _control_requests.py)

    def set_compaction_rewrite(self, rewrite: Rewrite | None) -> None:
        """Have the proxy rewrite claude's compaction requests (needs the proxy on)."""
        if self._proxy is None:
            raise EngineError("compaction rewriting needs the engine's proxy (EngineOptions(proxy=True))")
        self._proxy.rewrite = rewrite

    @property
    def context_high_water(self) -> int:
        return self._proxy.high_water if self._proxy else 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def kill(self) -> None:
        """Kill claude at once, as a crash would (it is restarted if restarts remain)."""
        if self._process is not None:
            self._process.kill()

    def _has_transcript(self) -> bool:
        if not self.session_id:
            return False
        try:
            return _transcripts.transcript_path(self.session_id, self.cwd, self.env).is_file()
        except EngineError:
            return False

    def _require_control(self) -> ControlChannel:
        if self._control is None or self.state is not EngineState.RUNNING:
            raise SessionClosedError(f"the engine is {self.state.value}")
        return self._control

    # -- events out (claude's stdout is read in _reader.py), and a restart -------------------------
    async def _emit(self, event: Event) -> None:
        try:
            await self._send_events.send(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # nobody is listening any more

    def _on_usage(self, usage: Usage) -> None:
        try:
            self._send_events.send_nowait(usage)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("usage event dropped: the event stream is full or closed")

    async def _recover(self, code: int | None, stderr: str) -> None:
        """claude died under us: start it again on the same session, or give up and say why."""
        while self.restarts < self.options.max_restarts and not self._closing:
            self.restarts += 1
            self.state = EngineState.RESTARTING
            reason = f"claude exited with code {code}"
            log.warning("%s; restarting (attempt %d)%s", reason, self.restarts, _stderr_end(stderr))
            self.trace.end_turn(outcome="restarted", error=reason)
            resume = self.session_id if self._has_transcript() else None
            try:
                await self._spawn(resume=resume)
            except EngineError as e:
                code, stderr = e.exit_code, e.stderr
                continue
            if self._closing:  # closed while this claude started: it is nobody's
                process, self._process = self._process, None
                if process is not None:
                    await process.close(self.settings.close_timeout)
                return
            self.state = EngineState.RUNNING
            if resume is None:
                self.session_id = None  # a new session: its id comes with the next init
            await self._emit(
                Restarted(session_id=resume, attempt=self.restarts, reason=reason, resumed=resume is not None)
            )
            return
        if not self._closing:
            self.state = EngineState.FAILED
            self._process = None
            self.trace.end_turn(outcome="error", error=f"claude exited with code {code} and was not restarted")
            await self._emit(
                ErrorEvent(
                    source="process",
                    message=(
                        f"claude exited with code {code} and was not restarted "
                        f"({self.restarts} of {self.options.max_restarts} restarts used){_stderr_end(stderr)}"
                    ),
                )
            )
            self._send_events.close()


def _stderr_end(stderr: str) -> str:
    """The end of what claude wrote to stderr, for a message about its exit ("" when it wrote nothing)."""
    tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:] if line.strip())
    return f" (its stderr ends: {tail[-800:]})" if tail else ""
