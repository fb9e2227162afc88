"""Engine: one claude process as a stream of typed events, with its control channel and proxy.

`async with Engine(options) as engine: await engine.start()` spawns claude; `send()` writes a
user message; `events()` yields everything claude says, plus what the engine notices (bad lines,
API errors, usage from the proxy, exits, restarts). A crash restarts claude with `--resume` of the
same session, up to `max_restarts` times; the events say so. A claude that exits as it starts because it read
its own config file half-written (claude writes it in place, so a start beside another in the same HOME can)
is started again, up to `max_restarts` more times (not counted in `restarts`).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any

import anyio
import orjson
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .. import _spans
from .._accounts import AccountError, account, hand_over
from . import _transcripts
from ._control import ControlChannel
from ._events import (
    AssistantMessage,
    CompactBoundary,
    ContextUsage,
    ErrorEvent,
    Event,
    McpServerStatus,
    MirrorError,
    ProcessExit,
    Restarted,
    Result,
    SystemInit,
    Usage,
    UserMessage,
    parse_event,
)
from ._hooks import HookRegistry, QuietHooks
from ._inprocess import InProcessServers
from ._mirror import TranscriptMirror
from ._options import EngineOptions, find_claude
from ._process import CLIProcess, OversizedLine
from ._proxy import Proxy, Rewrite
from ._session_store import Materialized, SessionKey, latest, materialize
from ._tracing import EngineTrace, claude_resource
from .exceptions import EngineError, McpServerError, ProcessError, SessionClosedError
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


class Engine:
    """One claude process and its session: start or resume it, send turns, read typed events, answer its
    control requests; restarted on the same session if it dies. `Session` adds the queue and the router."""

    def __init__(self, options: EngineOptions | None = None, settings: EngineSettings | None = None) -> None:
        self.options = options or EngineOptions()
        self.settings = settings or EngineSettings()
        self.state = EngineState.NEW
        self.session_id: str | None = None
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
        self._mirror: TranscriptMirror | None = None
        self._materialized: Materialized | None = None
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
        nothing is mirrored into the session store until `take_over` (a warm spare's rehearsal is nobody's).
        `one_session=False`: this claude will serve many sessions (a pool's, which `/clear`s between them), so
        its own telemetry is not given one session's id as a resource attribute."""
        if self._tg is None:
            raise EngineError("use the engine as `async with Engine(...) as engine`")
        if self.state is not EngineState.NEW:
            raise EngineError(f"the engine is already {self.state.value}")
        if self.options.session_store is not None:
            session_id = await self._from_store(session_id)
            if mirror:
                self._start_mirror()
        if session_id is not None:
            path = _transcripts.transcript_path(session_id, self.cwd, self.env)
            if not path.is_file():
                raise EngineError(f"no transcript for session {session_id} in {path.parent}")
            for event in _transcripts.replay(path):
                await self._emit(event)
            self.session_id = session_id
        self._one_session = one_session and mirror  # a spare's session is its taker's, made after a /clear
        self.trace.start()
        if self.options.proxy:
            self._proxy = Proxy(self.env.get("ANTHROPIC_BASE_URL"), self._on_usage, self.trace)
            await self._tg.start(self._proxy.run)
            self.env["ANTHROPIC_BASE_URL"] = self._proxy.url
            if self.trace.on:  # Frobozz's MCP servers ask here for their call's trace context
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
        self.trace.attributes = {k: v for k, v in options.trace_attributes.items() if v is not None}  # the taker's
        self._hooks = HookRegistry(options.hooks)
        if self._control is not None:  # (a rehearsal's quiet hooks end here)
            self._control.rebind(can_use_tool=options.can_use_tool, hooks=self._hooks)
        if self._proxy is not None:
            self._proxy.rehearsing = False  # the taker's model requests go to the API
        if self._process is not None:
            self._process.tell_stderr_to(options.stderr)
        self.session_id = None  # the taker's session begins with its first message
        if self._mirror is not None:
            self._mirror.project_key = options.session_project
        elif options.session_store is not None:
            self._start_mirror()

    def rehearse(self) -> bool:
        """From now until `take_over` (a warm spare's rehearsal, and its wait for a taker): claude's hook
        callbacks get empty answers (no hook of the options is called), and its model requests are answered by
        the engine's own proxy, with no tokens, and sent nowhere. Whether the proxy answers them: not without one."""
        if self._control is not None:
            self._control.rebind(can_use_tool=self.options.can_use_tool, hooks=QuietHooks())
        if self._proxy is not None:
            self._proxy.rehearsing = True
        return self._proxy is not None

    def _start_mirror(self) -> None:
        assert self._tg is not None and self.options.session_store is not None
        self._mirror = TranscriptMirror(
            self.options.session_store,
            projects_dir=_transcripts.config_dir(self.env) / "projects",
            project_key=self.options.session_project,
            flush=self.options.session_store_flush,
            timeout=self.options.session_store_timeout,
            on_error=self._on_mirror_error,
        )
        self._tg.start_soon(self._mirror.run)

    async def _from_store(self, session_id: str | None) -> str | None:
        """The session to resume, loaded from the store into a private config directory when this machine
        has no transcript of it (for `continue_conversation`, the store's latest when this machine has none)."""
        store, project = self.options.session_store, self.options.session_project
        assert store is not None
        project = project or _transcripts.project_key(self.cwd)
        timeout = self.options.session_store_timeout
        if (
            session_id is None
            and self.options.continue_conversation
            and not _transcripts.list_sessions(self.cwd, self.env)
        ):
            session_id = await latest(store, project, timeout)
        if session_id is None or _transcripts.transcript_path(session_id, self.cwd, self.env).is_file():
            return session_id
        self._materialized = await materialize(
            store, session_id, project_key=project, cwd=self.cwd, env=self.env, timeout=timeout
        )
        if self._materialized is None:
            raise EngineError(f"no transcript for session {session_id} here or in the session store")
        self.env["CLAUDE_CONFIG_DIR"] = str(self._materialized.config_dir)
        user, group = self._account
        if user is not None:  # claude, as that account, writes its transcript there
            # the lock file stays this process's: the account could otherwise swap in one a sweep would take
            hand_over(self._materialized.config_dir, user, group, keep=[self._materialized.folder.lock_file])
        return session_id

    def _on_mirror_error(self, key: SessionKey | None, error: str) -> None:
        session = key["session_id"] if key else ""
        event = MirrorError(
            source="session_store",
            session_id=session,
            subpath=key.get("subpath") if key else None,
            message=f"the session store missed transcript entries of {session}: {error}",
        )
        try:
            self._send_events.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("mirror error event dropped: the event stream is full or closed")

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
        self._tg.start_soon(self._read, process, self._control, settled, self._reader_done)
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
        sessions again, as it would a subprocess server's)."""
        if not self.options.in_process_servers:
            return None
        assert self._tg is not None
        if self._servers_scope is not None:
            self._servers_scope.cancel()
        servers, scope = InProcessServers(self.options.in_process_servers), anyio.CancelScope()

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
        mirror, self._mirror = self._mirror, None
        if mirror is not None:  # the last frames, then the writer stops
            with anyio.CancelScope(shield=True):
                if not await mirror.drain(self.options.session_store_timeout):
                    log.warning("the session store was still writing when the engine closed")
                mirror.close()
        if self._materialized is not None:
            self._materialized.remove()
            self._materialized = None
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

    async def mcp_status(self) -> tuple[McpServerStatus, ...]:
        """What claude says of each MCP server from the config, now."""
        answer = await self._require_control().request("mcp_status")
        return tuple(McpServerStatus.parse(s) for s in answer.get("mcpServers") or () if isinstance(s, Mapping))

    async def wait_for_mcp(
        self,
        names: Iterable[str] | None = None,
        *,
        timeout: float = 120,  # noqa: ASYNC109 - the error names the servers
        poll: float = 0.1,
    ) -> tuple[McpServerStatus, ...]:
        """Until claude has started the MCP servers (those named, or all): a turn that begins while a
        server is still "pending" runs without its tools. McpServerError names each one that failed,
        is missing from the config, or was still starting after `timeout` seconds. In-process servers are
        served as claude starts (its status answer leaves them out): there is nothing to wait for."""
        wanted = None if names is None else set(names) - set(self.options.in_process_servers)

        async def status() -> list[McpServerStatus]:
            return [s for s in await self.mcp_status() if wanted is None or s.name in wanted]

        servers = await status()
        with anyio.move_on_after(timeout):
            while any(s.status == "pending" for s in servers):  # claude has no event for this: ask again
                await anyio.sleep(poll)
                servers = await status()
        commands = self.options.server_commands()
        problems = [
            f"{s.name}: {s.status}"
            + (f" ({s.error})" if s.error else "")
            + (
                f" [command: {commands[s.name]}]"
                if s.name in commands and commands[s.name] not in (s.error or "")
                else ""
            )
            for s in servers
            if s.status != "connected"
        ]
        problems += [f"{name}: not in the MCP config" for name in sorted((wanted or set()) - {s.name for s in servers})]
        if problems:
            late = f" after {timeout:g} s" if any(s.status == "pending" for s in servers) else ""
            raise McpServerError(f"MCP servers not connected{late}: " + "; ".join(problems))
        return tuple(servers)

    async def rewind_files(self, user_message_id: str) -> None:
        """Put the files claude's tools changed back as they were at that user message (its `uuid`); needs
        `EngineOptions(file_checkpointing=True)`."""
        await self._require_control().request("rewind_files", user_message_id=user_message_id)

    async def get_context_usage(self) -> ContextUsage:
        """How full the context window is now, and with what."""
        return ContextUsage.parse(await self._require_control().request("get_context_usage"))

    async def reconnect_mcp_server(self, name: str) -> None:
        """Start an MCP server of the config again (after it failed or was turned off)."""
        await self._require_control().request("mcp_reconnect", serverName=name)

    async def toggle_mcp_server(self, name: str, enabled: bool) -> None:
        """Turn an MCP server of the config off (its tools go) or on again."""
        await self._require_control().request("mcp_toggle", serverName=name, enabled=enabled)

    async def stop_task(self, task_id: str) -> None:
        """Stop a background task (a subagent or a shell) by the id its task events carry."""
        await self._require_control().request("stop_task", task_id=task_id)

    def get_server_info(self) -> dict[str, Any]:
        """What claude answered to `initialize`: its commands, agents, output styles, models and account."""
        return dict(self.init_response)

    async def set_model(self, model: str | None) -> None:
        await self._require_control().request("set_model", model=model)

    async def set_permission_mode(self, mode: str) -> None:
        await self._require_control().request("set_permission_mode", mode=mode)

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

    # -- reading ----------------------------------------------------------------------------------
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

    async def _read(
        self, process: CLIProcess, control: ControlChannel, settled: anyio.Event, done: anyio.Event
    ) -> None:
        """One claude's stdout, to its end: then its exit said, and a crash restarted. What it says before it
        has answered a control request is held, and dropped if it exits first: its start failed, and says so
        (a claude that exits on a config file it cannot read prints an error result on the way)."""
        assert self._tg is not None
        held: list[Event] = []

        async def flush() -> None:
            while held:
                await self._dispatch(held.pop(0))

        async def say(event: Event) -> None:
            if control.answered:
                await flush()
                await self._dispatch(event)
            else:
                held.append(event)

        try:
            async for line in process.lines():
                if isinstance(line, OversizedLine):
                    await say(
                        ErrorEvent(
                            source="stdout",
                            message=(
                                f"a line longer than {process.max_line_bytes} bytes was dropped: {bytes(line[:80])!r}…"
                            ),
                        )
                    )
                    continue
                try:
                    data = orjson.loads(line)
                except orjson.JSONDecodeError:
                    data = None
                if not isinstance(data, dict):
                    await say(ErrorEvent(source="stdout", message=f"not a JSON object: {line[:200]!r}"))
                    continue
                kind = data.get("type")
                if kind == "control_response":
                    control.on_response(data)
                    if control.answered:
                        await flush()
                elif kind == "control_request":
                    control.on_request(data, self._tg)
                elif kind == "control_cancel_request":
                    control.on_cancel(data)
                elif kind == "transcript_mirror":
                    if self._mirror is not None:
                        self._mirror.enqueue(data)
                else:
                    await say(parse_event(data))
            code = await process.wait()
            stderr = process.stderr_tail
            control.fail_all(ProcessError(f"claude exited with code {code}", exit_code=code, stderr=stderr))
            await settled.wait()
            if process is not self._process:  # a start that failed (it says so), or a claude since replaced
                return
            expected = self._closing
            await self._emit(ProcessExit(exit_code=code, stderr=stderr[-4000:], expected=expected))
            if not expected:
                await self._recover(code, stderr)
        finally:
            done.set()

    async def _dispatch(self, event: Event) -> None:
        if isinstance(event, (SystemInit, Result)) and event.session_id:
            self.session_id = event.session_id
            self.trace.set_session_id(event.session_id)
        if self.trace.on:
            self._traced(event)
        if isinstance(event, Result) and self._mirror is not None:
            self._mirror.flush_soon()
        if isinstance(event, Result) and event.structured is not None:
            event = await self._typed(event)
        if isinstance(event, Result) and event.is_error and event.api_error_status:
            # before the Result, so a consumer that stops at the end of the turn has seen it
            await self._emit(
                ErrorEvent(
                    source="api",
                    status=event.api_error_status,
                    message=event.result or f"API error {event.api_error_status}",
                )
            )
        await self._emit(event)

    def _traced(self, event: Event) -> None:
        if isinstance(event, CompactBoundary) and not event.is_replay:
            self.trace.compacted(event.trigger, event.pre_tokens)
        elif isinstance(event, AssistantMessage):
            self.trace.on_assistant(event)
        elif isinstance(event, UserMessage):
            self.trace.on_user(event)
        elif isinstance(event, Result) and not event.is_replay:
            self.trace.end_turn(event)

    async def _typed(self, result: Result) -> Result:
        """The structured answer as an instance of the pydantic model asked for (kept as JSON if it does not fit)."""
        schema = self.options.output_schema
        if schema is None or isinstance(schema, Mapping):
            return result
        try:
            return replace(result, structured=schema.model_validate(result.structured))
        except ValueError as e:  # pydantic's ValidationError is one
            await self._emit(
                ErrorEvent(source="structured_output", message=f"the answer does not fit {schema.__name__}: {e}")
            )
            return result

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
                        f"({self.restarts} of {self.options.max_restarts} restarts used): {stderr[-500:]}"
                    ),
                )
            )
            self._send_events.close()


def _stderr_end(stderr: str) -> str:
    """The end of what claude wrote to stderr, for a message about its exit ("" when it wrote nothing)."""
    tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:] if line.strip())
    return f" (its stderr ends: {tail[-800:]})" if tail else ""
