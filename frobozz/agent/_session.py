"""One agent session: its claude (an engine, started on the first message and released when idle), its
queue of messages (answered one at a time, in order), its questions to the user, and its relay.

claude's stream becomes the session's events: text deltas from partial messages, tool uses and results,
a Done with usage and cost at each turn's end. A PreToolUse hook keeps file writes inside the workspace
and tools to the allowed list (the model reads why a call was refused); the permission callback turns
AskUserQuestion into a Question event and waits for `answer()`."""

from __future__ import annotations

import logging
import math
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from frobozz.engine import (
    Allow,
    AssistantMessage,
    Deny,
    Engine,
    EngineOptions,
    ErrorEvent,
    HookInput,
    HookMatcher,
    HookOutput,
    PermissionContext,
    Restarted,
    Result,
    StreamEvent,
    TranscriptNotFoundError,
    TurnCost,
    UserMessage,
    WarmSpare,
)
from frobozz.engine import started as started_engine
from frobozz.engine.observers import ToolCall, ToolLog
from frobozz.loop import MemorySession
from frobozz.memory import DatabaseError

from ._events import Done, Error, Question, Status, TextDelta, ToolResult, ToolUse
from ._history import State, changed, dirty, is_repository
from ._relay import Relay
from ._store import SessionRecord
from ._workspaces import Workspace, Workspaces
from .exceptions import HistoryError

log = logging.getLogger("frobozz.agent")
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
ASK = "AskUserQuestion"
COMMIT_WITHIN = 60.0  # seconds a turn's commit may take (it is finished even when the lease is lost meanwhile)


class AgentSession:
    def __init__(
        self,
        record: SessionRecord,
        workspace: Workspace,
        relay: Relay,
        *,
        workspaces: Workspaces,
        options: EngineOptions,
        question_timeout: float,
        on_change: Callable[[AgentSession, int], Any],
        on_tool_call: Callable[[AgentSession, ToolCall], Any],
        on_message: Callable[..., Any],
        answers: Callable[[AgentSession, str, float], Awaitable[dict[str, Any] | None]],
        on_turn: Callable[[AgentSession, str, list[str]], Awaitable[Any]] | None = None,
        images: Callable[[AgentSession, list[str]], Awaitable[list[dict[str, Any]]]] | None = None,
        memory_loop: Callable[[EngineOptions, str, str | None], MemorySession] | None = None,
        memory_options: Callable[[EngineOptions, str], tuple[EngineOptions, bool]] | None = None,
        spare: WarmSpare | None = None,
    ) -> None:
        self.record = record
        self.memory_options = memory_options  # (options, namespace) -> the memory loop's claude's options
        self.spare = spare  # a claude started ahead of need, taken when this session's options launch the same
        self._costs = TurnCost()  # claude's running cost totals, turned into each turn's cost
        self.workspace = workspace
        self.workspaces = workspaces
        self.relay = relay
        self.base_options = options
        self.question_timeout = question_timeout
        self.on_change = on_change
        # (session, "user" or "agent", text, the driver's lease token, interrupted=): the conversation as people
        # see it (an interrupted turn's reply: what was streamed of it)
        self.on_message = on_message
        self.tool_log = ToolLog(cwd=workspace.path, on_call=lambda call: on_tool_call(self, call))
        self.memory_loop = memory_loop  # (options, namespace, loop session to resume) -> the memory loop
        self.engine: Engine | None = None
        self.reserved = False  # room under --max-live is kept for this session while its claude starts
        self._channel: Engine | MemorySession | None = None  # where a turn's text goes and its events come from
        self.last_used = anyio.current_time()
        self._queue_in, self._queue_out = anyio.create_memory_object_stream[tuple[str, str, list[str]]](math.inf)
        self._queue_in.close()  # no driver until this instance holds the session (`claim`)
        self._queued: set[str] = set()  # the messages handed to the driver (from the inbox)
        self.inbox_after = 0  # the inbox position read up to
        self.tool_base = 0  # tool calls logged before this instance took the session
        self.answers = answers  # (session, question id, timeout) -> the answers, or None when none came
        self.images = images  # (session, file ids) -> the image content blocks a message carries
        self.on_turn = on_turn  # (session, the message's first line, files the turn wrote): at each turn's end
        self._stop = anyio.Event()
        self._cut = anyio.Event()  # set by `cut_short`: the turn under way is another instance's (the lease is lost)
        self._engine_done = anyio.Event()
        self._engine_done.set()
        self._driving = anyio.CancelScope()  # the driver's: cancelled when the lease is lost (`stop_driving`)
        self._driven = anyio.Event()  # set once the last driver has ended
        self._driven.set()
        self._busy = False
        self._interrupted = False  # an interrupt was asked during the turn under way
        self.current: str | None = None  # the message whose turn is in hand
        self._before_bash: dict[str, dict[str, State | None]] = {}  # tool use id -> the files before it

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def claudes(self) -> int:
        """claude processes this session needs while live (with memory, the loop's sidecars too)."""
        return MemorySession.CLAUDES if self.record.options.get("memory") and self.memory_loop else 1

    @property
    def busy(self) -> bool:
        if not self.owned:
            return self.state in ("streaming", "waiting")
        return self._busy or self._queue_out.statistics().current_buffer_used > 0

    @property
    def mid_turn(self) -> bool:
        """This instance's driver has a message in hand (its claude starting, or answering it)."""
        return self._busy

    @property
    def owned(self) -> bool:
        """This instance holds the session's lease: it runs its claude."""
        return self.relay.owned

    # -- what the owner does --------------------------------------------------------------------------
    def claim(self, token: int, acquire: Callable[[AgentSession], Any], task_group: TaskGroup) -> None:
        """This instance runs the session now: a driver answers what the inbox hands it (the last one has ended:
        `driven`; the two would share this session's state)."""
        self.relay.take(token)
        self._queue_in, self._queue_out = anyio.create_memory_object_stream[tuple[str, str, list[str]]](math.inf)
        self._queued = set()
        self._driving, self._driven = anyio.CancelScope(), anyio.Event()
        task_group.start_soon(self.drive, acquire, task_group, token, self._driving, self._driven)

    def stop_driving(self) -> None:
        """The lease is lost: the driver stops where it is, mid-turn or mid-write (what it would still say is not
        its to say), so that a driver of a later lease, here, has the session's state to itself at once."""
        self._driving.cancel()

    async def driven(self) -> None:
        """Until the last driver has ended."""
        await self._driven.wait()

    def enqueue(self, message_id: str, text: str, files: list[str] | None = None) -> None:
        """A message from the inbox (with the ids of the images it carries), in the order accepted (each once)."""
        if message_id not in self._queued:
            self._queued.add(message_id)
            self._queue_in.send_nowait((message_id, text, list(files or ())))

    def disown(self) -> None:
        """The lease is gone (taken over, or given up): nothing more is said or run here."""
        self.relay.drop()
        self.close()

    def close(self) -> None:
        """No more messages: the driver ends once the turn in hand has."""
        self._queue_in.close()

    async def interrupt(self) -> None:
        if self.engine is not None and self._busy:
            self._interrupted = True  # (the turn's reply is kept as interrupted, when claude ends it without one)
            await self.engine.interrupt()

    # -- the driver ----------------------------------------------------------------------------------
    async def drive(
        self,
        acquire: Callable[[AgentSession], Any],
        task_group: TaskGroup,
        token: int,
        scope: anyio.CancelScope,
        ended: anyio.Event,
    ) -> None:
        """Answer the queued messages, one turn at a time, starting claude when one comes, until the queue closes
        or the driver is stopped (`scope`); `ended` is set then."""
        try:
            with scope:
                await self._answer(acquire, task_group, token)
        finally:
            ended.set()

    async def _answer(self, acquire: Callable[[AgentSession], Any], task_group: TaskGroup, token: int) -> None:
        async for message_id, text, files in self._queue_out:
            self._busy = True
            self.current = message_id
            self._interrupted = False
            begun = False
            try:
                await self.on_message(self, "user", text, token)  # in the history before any tab hears of the turn:
                self.relay.publish(Status(state="streaming", message_id=message_id), token)  # tabs read it on this
                begun = True
                if self.engine is None:
                    await acquire(self)  # reserves room for this session's claudes until they are up
                    try:
                        await self._start(task_group, token)
                    finally:
                        self.reserved = False
                await self._turn(text, files, token)
            except Exception as e:  # a turn that fails says so; the session goes on
                if not self.relay.closed:  # (a session closed mid-turn ends its turn this way: nothing to say)
                    if self.relay.token == token:
                        log.exception("session %s: the turn failed", self.id)
                    if not begun:  # (the message was not kept) a turn's events still begin with its status
                        self.relay.publish(Status(state="streaming", message_id=message_id), token)
                    self.relay.publish(Error(message=f"{type(e).__name__}: {e}"), token)
                    self.relay.publish(Status(state="idle", message_id=message_id), token)
                    if self.relay.token == token:  # its record says so too (saved as streaming once claude's session
                        try:  # was known)
                            await self.on_change(self, token)
                        except DatabaseError as unsaved:  # (perhaps what failed the turn)
                            log.warning("session %s: its record is not saved: %s", self.id, unsaved)
                if self.relay.token == token:  # (else its claude is gone already: a release now would stop the
                    await self.release()  # claude of the session's next lease here, if any)
            finally:
                self._busy = False
                self.current = None
                self.last_used = anyio.current_time()

    def prime(self) -> None:
        """Have the spare start the claude this (new) session will want, while the user writes to it."""
        options = self.launch_options()
        if self.spare is not None and options is not None:
            self.workspaces.sync_skills(self.workspace)
            self.spare.prime(options)

    def launch_options(self) -> EngineOptions | None:
        """The options this session's claude starts with, when a spare could serve it (a new session: one to
        resume starts its own claude, on its transcript)."""
        if self.record.claude_session_id or self.record.memory_session:
            return None
        options = self._options(self.workspaces.mcp_servers(self.workspace))
        memory = self.record.options.get("memory")
        if memory and self.memory_options is not None:
            options = self.memory_options(options, memory["namespace"])[0]
        return options

    async def _start(self, task_group: TaskGroup, token: int) -> None:
        try:
            await self._start_claude(task_group, token)
        except TranscriptNotFoundError as e:  # its claude was cut off in its first turn (its instance lost) before
            log.warning(  # the store had any of its transcript: nothing of it to resume, so it starts anew
                "session %s: claude's session %s has no transcript to resume: a new one is started",
                self.id,
                e.session_id,
            )
            self.record.claude_session_id = None
            await self._start_claude(task_group, token)

    async def _start_claude(self, task_group: TaskGroup, token: int) -> None:
        # what can fail before claude starts (skills that cannot be copied) fails here, before the events a
        # release waits on are new: a release after it must not wait for a claude that never was
        self.workspaces.sync_skills(self.workspace)
        options = self._options(self.workspaces.mcp_servers(self.workspace))
        failure: list[BaseException] = []
        memory = self.record.options.get("memory")
        if self.relay.token != token:  # let go (handed over, lost, claimed again) while it waited for room: a
            raise RuntimeError("the session is no longer this driver's")  # release then is not to be undone
        # this run's own events (a later driver's _start makes new ones: each run waits on and sets its own)
        started, stop, cut, done = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()
        self._stop, self._cut, self._engine_done = stop, cut, done

        async def live(engine: Engine, channel: Engine | MemorySession) -> None:
            # a resumed claude carries on from the total it restored (after a kill, not what the session has cost)
            self._costs.resumed_by(engine)
            self.engine, self._channel = engine, channel
            started.set()
            await stop.wait()  # then the engine closes as it should: its transcript stored
            if cut.is_set():  # another instance answers the turn under way: this claude is not let finish it
                with anyio.CancelScope(shield=True):
                    await engine.close(finish=False)

        async def run() -> None:
            ours: Engine | None = None
            try:
                if memory and self.memory_loop is not None:
                    async with self.memory_loop(options, memory["namespace"], self.record.memory_session) as loop:
                        if self.record.memory_session != loop.id:
                            self.record.memory_session = loop.id
                            await self.on_change(self, token)  # kept at once: a restart resumes this loop session
                        ours = loop.pool.primary.engine
                        await live(ours, loop)
                else:
                    async with started_engine(
                        options, spare=self.spare, resume=self.record.claude_session_id
                    ) as engine:
                        ours = engine
                        await live(engine, engine)
            except Exception as e:  # noqa: BLE001 - said by the turn that wanted it
                failure.append(e)
            finally:
                if self.engine is ours:  # (not another run's, started since)
                    self.engine = self._channel = None
                started.set()
                done.set()

        task_group.start_soon(run)  # (anyio runs a task's first step even in a cancelled group: `done` is set)
        await started.wait()
        if done.is_set():  # (run sets `started` and `done` with no await between: it ended, or never went live)
            raise failure[0] if failure else RuntimeError("claude did not start")

    def cut_short(self) -> None:
        """The lease is lost, so a turn under way is another instance's now: at its release (whoever asks for it
        first), claude is stopped at once, not let finish it (its tools would go on acting in the workspace, and
        its transcript on growing, beside the new driver's)."""
        self._cut.set()

    async def release(self, timeout: float = math.inf) -> bool:  # noqa: ASYNC109 - the wait is shielded
        """Let this session's claude go (it resumes on the next message). The wait for it to close is shielded
        (a cancelled caller must not leave it half closed), so a bound is given here: False when it had not
        closed within `timeout` seconds (the caller's task group is then what stops it)."""
        self._stop.set()
        done = self._engine_done
        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
            await done.wait()
        return done.is_set()

    def _options(self, servers: dict[str, Any]) -> EngineOptions:
        opts = self.record.options
        base = self.base_options
        if self.workspace.account is not None:  # the service is root: claude runs as the workspace's owner
            uid, gid = self.workspace.account
            home = self.workspaces.owners.home(uid, gid, {**os.environ, **base.env})
            base = replace(base, user=uid, group=gid, env={**base.env, **home})
        return replace(
            base,
            cwd=self.workspace.path,
            include_partial_messages=True,
            strict_mcp_config=True,
            mcp_config={"mcpServers": servers},
            model=opts.get("model") or base.model,
            max_turns=opts.get("max_turns"),
            max_budget_usd=opts.get("max_budget_usd"),
            can_use_tool=self._permission,
            hooks={**base.hooks, "PreToolUse": [*base.hooks.get("PreToolUse", ()), HookMatcher([self._guard])]},
            session_project=f"frobozz-agent-{self.id}",
        )

    async def _turn(self, text: str, files: list[str], token: int) -> None:
        """One turn, its events and its part of the conversation written under `token`, the lease its driver was
        given: a driver whose lease was lost (this instance may hold the session again since, under another
        token, with a new driver) says nothing more."""
        assert self.engine is not None and self._channel is not None
        engine, channel = self.engine, self._channel
        first_line = text.strip().split("\n", 1)[0]
        if self.record.preamble:
            text = f"{self.record.preamble}\n\n{text}"
        calls_before = len(self.tool_log.calls)
        self._before_bash, by_bash = {}, []  # files Bash changed (the file tools' own are in the tool log)
        streamed: list[list[str]] = []  # the text streamed of each of the turn's messages from claude
        images = await self.images(self, files) if files and self.images is not None else []
        if not images:
            await channel.send(text)  # with memory: orientation, recall and the nudge go before the text
        elif isinstance(channel, MemorySession):  # what memory adds, the text, then the images (all archived)
            await channel.send(text, images)
        else:  # (a message of images alone has no text block: the API refuses an empty one)
            await channel.send([*([{"type": "text", "text": text}] if text.strip() else []), *images])
        async for event in channel.events():
            if self.relay.token != token:
                raise RuntimeError("another instance took the session over")
            self.tool_log.on_event(event)
            if engine.session_id and engine.session_id != self.record.claude_session_id:
                self.record.claude_session_id = engine.session_id  # kept at once: another instance resumes it
                await self.on_change(self, token)
            if isinstance(event, StreamEvent):
                delta = event.event.get("delta") or {}
                if event.event.get("type") == "message_start" and not event.raw.get("parent_tool_use_id"):
                    streamed.append([])
                if (
                    event.event.get("type") == "content_block_delta"
                    and delta.get("type") == "text_delta"
                    and delta.get("text")
                    and not event.raw.get("parent_tool_use_id")
                ):
                    if not streamed:
                        streamed.append([])
                    streamed[-1].append(delta["text"])
                    self.relay.publish(TextDelta(text=delta["text"]), token)
            elif isinstance(event, AssistantMessage) and not event.is_replay:
                for use in event.tool_uses:
                    self.relay.publish(ToolUse(id=use.id, name=use.name, input=dict(use.input)), token)
            elif isinstance(event, UserMessage) and not event.is_replay:
                for result in event.tool_results:
                    if result.tool_use_id in self._before_bash:
                        by_bash += await self._changed_by_bash(self._before_bash.pop(result.tool_use_id))
                    self.relay.publish(
                        ToolResult(tool_use_id=result.tool_use_id, output=result.content, is_error=result.is_error),
                        token,
                    )
            elif isinstance(event, ErrorEvent):
                self.relay.publish(Error(message=event.message), token)
            elif isinstance(event, Restarted) and event.resumed:  # claude crashed: it restored an older total
                self._costs.resumed_by(engine)
            elif isinstance(event, Result) and not event.is_replay:
                self.record.preamble = ""  # sent with the first message
                self.record.claude_session_id = event.session_id or engine.session_id
                self.record.usage = _added(self.record.usage, event.usage)
                turn_cost = self._costs.of(event) or 0.0
                self.record.cost_usd += turn_cost
                # kept before anyone hears of it; a turn ended without a result (interrupted, out of turns): what
                # the user saw of it
                reply = event.result if event.result is not None else "\n\n".join(filter(None, map("".join, streamed)))
                interrupted = self._interrupted and event.is_error
                await self.on_message(self, "agent", reply, token, interrupted=interrupted)
                if self.on_turn is not None:  # the files the turn wrote, committed before anyone hears of it
                    written = [
                        *(
                            c.target
                            for c in self.tool_log.calls[calls_before:]
                            if c.name in FILE_TOOLS and c.outcome == "ok"
                        ),
                        *by_bash,
                    ]
                    # not cut off by a lost lease: a git killed mid-commit leaves its index.lock behind, and every
                    # later commit in the workspace fails
                    with anyio.CancelScope(shield=True, deadline=anyio.current_time() + COMMIT_WITHIN):
                        await self.on_turn(self, first_line, written)
                self._busy = False  # likewise: a status asked for after `done` says stable
                self.last_used = anyio.current_time()  # and --max-live, asked next, sees this turn as the latest
                self.record.last_activity = datetime.now(UTC)  # as a client told `done` reads it (saved just after)
                self.relay.publish(
                    Done(
                        usage=dict(event.usage),
                        cost_usd=turn_cost,
                        is_error=event.is_error,
                        result=event.result,
                        message_id=self.current,
                    ),
                    token,
                )
                self.relay.publish(Status(state="idle", message_id=self.current), token)
                await self.on_change(self, token)
                return
        raise RuntimeError("claude's stream ended before the turn did")

    async def _changed_by_bash(self, before: dict[str, State | None]) -> list[str]:
        try:
            return changed(before, await dirty(self.workspace, before))
        except HistoryError as e:
            log.warning("session %s: what Bash changed is not known: %s", self.id, e)
            return []

    # -- the guard and the questions ------------------------------------------------------------------
    async def _guard(self, hook: HookInput) -> HookOutput | None:
        name, tool_input = hook.tool_name or "", dict(hook.tool_input or {})
        allowed = self.record.options.get("allowed_tools")
        if allowed is not None and name not in allowed and name != ASK:
            self.tool_log.denied(hook.tool_use_id)
            return HookOutput(
                permission="deny",
                reason=f"{name} is not among the tools this session may use ({', '.join(allowed) or 'none'})",
            )
        if name in FILE_TOOLS:
            target = Path(str(tool_input.get(FILE_TOOLS[name]) or ""))
            resolved = Path(await anyio.Path(self.workspace.path / target).resolve())  # absolute: the target itself
            if resolved != self.workspace.path and self.workspace.path not in resolved.parents:
                self.tool_log.denied(hook.tool_use_id)
                return HookOutput(
                    permission="deny",
                    reason=f"{name} may only change files inside the workspace "
                    f"{self.workspace.path}; {target} is outside it",
                )
        if name == "Bash" and hook.tool_use_id and is_repository(self.workspace):  # committed at the turn's end
            try:
                self._before_bash[hook.tool_use_id] = await dirty(self.workspace)
            except HistoryError as e:
                log.warning("session %s: what Bash changes will not be committed: %s", self.id, e)
        return None

    async def _permission(self, name: str, tool_input: Mapping[str, Any], context: PermissionContext) -> Allow | Deny:
        if name != ASK:
            return Allow()  # the guard has already kept it inside the workspace and the allowed tools
        question_id = secrets.token_hex(8)
        self.relay.publish(Question(question_id=question_id, questions=list(tool_input.get("questions") or [])))
        self.relay.publish(Status(state="waiting"))
        answers = await self.answers(self, question_id, self.question_timeout)  # from any instance, the first
        self.relay.publish(Status(state="streaming"))
        if answers is None:
            return Deny(
                f"the user did not answer within {self.question_timeout:g} s; go on without the answer, "
                "or ask again later"
            )
        return Allow(updated_input={**tool_input, "answers": answers})

    def describe(self) -> dict[str, Any]:
        return self.record.describe(str(self.workspace.path), self.state)

    @property
    def state(self) -> str:
        """Its latest status, published here or written by the instance that runs it (the record saved at a
        turn's end says 'idle' though that status is still on its way to the database)."""
        for logged in self.relay.newest_first():
            if isinstance(logged.event, Status):
                return logged.event.state
        return "idle"

    def tool_calls(self) -> list[dict[str, Any]]:
        return [asdict(c) for c in self.tool_log.calls]


def _added(total: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(total)
    for key, value in more.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = out.get(key, 0) + value
    return out
