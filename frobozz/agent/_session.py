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
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from frobozz.engine import (Allow, AssistantMessage, Deny, Engine, EngineOptions, ErrorEvent, HookInput, HookMatcher,
                            HookOutput, PermissionContext, Result, StreamEvent, UserMessage)
from frobozz.engine.observers import ToolCall, ToolLog
from frobozz.loop import MemorySession

from ._events import Done, Error, Question, Status, TextDelta, ToolResult, ToolUse
from ._relay import Relay
from ._store import SessionRecord
from ._workspaces import Workspace, Workspaces
from .exceptions import QuestionError

log = logging.getLogger("frobozz.agent")
FILE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
ASK = "AskUserQuestion"


class _Pending:
    def __init__(self, questions: list[dict[str, Any]]) -> None:
        self.questions = questions
        self.answers: dict[str, Any] | None = None
        self.answered = anyio.Event()


class AgentSession:
    def __init__(self, record: SessionRecord, workspace: Workspace, relay: Relay, *, workspaces: Workspaces,
                 options: EngineOptions, question_timeout: float, on_change: Callable[[AgentSession], Any],
                 on_tool_call: Callable[[AgentSession, ToolCall], Any],
                 on_message: Callable[[AgentSession, str, str], Any],
                 memory_loop: Callable[[EngineOptions, str, str | None], MemorySession] | None = None) -> None:
        self.record = record
        self.workspace = workspace
        self.workspaces = workspaces
        self.relay = relay
        self.base_options = options
        self.question_timeout = question_timeout
        self.on_change = on_change
        self.on_message = on_message  # (session, "user" or "agent", text): the conversation as people see it
        self.tool_log = ToolLog(cwd=workspace.path, on_call=lambda call: on_tool_call(self, call))
        self.memory_loop = memory_loop  # (options, namespace, loop session to resume) -> the memory loop
        self.engine: Engine | None = None
        self.reserved = False  # room under --max-live is kept for this session while its claude starts
        self._channel: Engine | MemorySession | None = None  # where a turn's text goes and its events come from
        self.last_used = anyio.current_time()
        self._queue_in, self._queue_out = anyio.create_memory_object_stream[tuple[str, str]](math.inf)
        self._questions: dict[str, _Pending] = {}
        self._stop = anyio.Event()
        self._engine_done = anyio.Event()
        self._engine_done.set()
        self._busy = False
        self.message_count = 0  # the conversation's messages so far (the agent keeps them)
        self._turns: dict[str, tuple[anyio.Event, list[int]]] = {}  # message -> (its turn began, at which seq)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def claudes(self) -> int:
        """claude processes this session needs while live (with memory, the loop's sidecars too)."""
        return MemorySession.CLAUDES if self.record.options.get("memory") and self.memory_loop else 1

    @property
    def busy(self) -> bool:
        return self._busy or self._queue_out.statistics().current_buffer_used > 0

    # -- what clients do -----------------------------------------------------------------------------
    def send(self, text: str) -> str:
        message_id = secrets.token_hex(8)
        self._turns[message_id] = (anyio.Event(), [])
        self._queue_in.send_nowait((message_id, text))
        return message_id

    async def turn_start(self, message_id: str) -> int:
        """The sequence number after which a message's turn begins (once it has begun)."""
        began, at = self._turns[message_id]
        await began.wait()
        return at[0]

    def answer(self, question_id: str, answers: Mapping[str, Any]) -> None:
        pending = self._questions.get(question_id)
        if pending is None or pending.answered.is_set():
            raise QuestionError(f"question {question_id[:64]} is not waiting for an answer (answered, timed out, "
                                "or never asked)")
        pending.answers = dict(answers)
        pending.answered.set()

    def close(self) -> None:
        """No more messages: the driver ends once the turn in hand has."""
        self._queue_in.close()

    async def interrupt(self) -> None:
        if self.engine is not None and self._busy:
            await self.engine.interrupt()

    # -- the driver ----------------------------------------------------------------------------------
    async def drive(self, acquire: Callable[[AgentSession], Any], task_group: TaskGroup) -> None:
        """Answer the queued messages, one turn at a time, starting claude when one comes."""
        async for message_id, text in self._queue_out:
            self._busy = True
            began, at = self._turns.pop(message_id, (anyio.Event(), []))
            at.append(self.relay.last_seq)
            began.set()
            try:
                await self.on_message(self, "user", text)
                if self.engine is None:
                    await acquire(self)  # reserves room for this session's claudes until they are up
                    try:
                        await self._start(task_group)
                    finally:
                        self.reserved = False
                await self._turn(text)
            except Exception as e:  # noqa: BLE001 - a turn that fails says so; the session goes on
                if not self.relay.closed:  # (a session closed mid-turn ends its turn this way: nothing to say)
                    log.exception("session %s: the turn failed", self.id)
                    self.relay.publish(Error(message=f"{type(e).__name__}: {e}"))
                    self.relay.publish(Status(state="idle"))
                await self.release()
            finally:
                self._busy = False
                self.last_used = anyio.current_time()

    async def _start(self, task_group: TaskGroup) -> None:
        started, self._stop = anyio.Event(), anyio.Event()
        self._engine_done = anyio.Event()
        self.workspaces.sync_skills(self.workspace)
        options = self._options(self.workspaces.mcp_servers(self.workspace))
        failure: list[BaseException] = []
        memory = self.record.options.get("memory")

        async def live(engine: Engine, channel: Engine | MemorySession) -> None:
            self.engine, self._channel = engine, channel
            started.set()
            await self._stop.wait()  # then the engine closes as it should: its transcript stored

        async def run() -> None:
            try:
                if memory and self.memory_loop is not None:
                    async with self.memory_loop(options, memory["namespace"], self.record.memory_session) as loop:
                        if self.record.memory_session != loop.id:
                            self.record.memory_session = loop.id
                            await self.on_change(self)  # kept at once: a restart resumes this loop session
                        await live(loop.pool.primary.engine, loop)
                else:
                    async with Engine(options) as engine:
                        await engine.start(self.record.claude_session_id)
                        await live(engine, engine)
            except Exception as e:  # noqa: BLE001 - said by the turn that wanted it
                failure.append(e)
            finally:
                self.engine = self._channel = None
                started.set()
                self._engine_done.set()

        task_group.start_soon(run)
        await started.wait()
        if self.engine is None:
            raise failure[0] if failure else RuntimeError("claude did not start")

    async def release(self) -> None:
        """Let this session's claude go (it resumes on the next message)."""
        self._stop.set()
        with anyio.CancelScope(shield=True):
            await self._engine_done.wait()

    def _options(self, servers: dict[str, Any]) -> EngineOptions:
        opts = self.record.options
        base = self.base_options
        if self.workspace.account is not None:  # the service is root: claude runs as the workspace's owner
            uid, gid = self.workspace.account
            home = self.workspaces.owners.home(uid, gid, {**os.environ, **base.env})
            base = replace(base, user=uid, group=gid, env={**base.env, **home})
        return replace(base, cwd=self.workspace.path, include_partial_messages=True, strict_mcp_config=True,
                       mcp_config={"mcpServers": servers},
                       model=opts.get("model") or base.model, max_turns=opts.get("max_turns"),
                       max_budget_usd=opts.get("max_budget_usd"), can_use_tool=self._permission,
                       hooks={**base.hooks, "PreToolUse": [*base.hooks.get("PreToolUse", ()),
                                                           HookMatcher([self._guard])]},
                       session_project=f"frobozz-agent-{self.id}")

    async def _turn(self, text: str) -> None:
        assert self.engine is not None and self._channel is not None
        engine, channel = self.engine, self._channel
        if self.record.preamble:
            text = f"{self.record.preamble}\n\n{text}"
        self.relay.publish(Status(state="streaming"))
        await channel.send(text)  # with memory: orientation, recall and the nudge go before the text
        async for event in channel.events():
            self.tool_log.on_event(event)
            if isinstance(event, StreamEvent):
                delta = event.event.get("delta") or {}
                if event.event.get("type") == "content_block_delta" and delta.get("type") == "text_delta" \
                        and delta.get("text") and not event.raw.get("parent_tool_use_id"):
                    self.relay.publish(TextDelta(text=delta["text"]))
            elif isinstance(event, AssistantMessage) and not event.is_replay:
                for use in event.tool_uses:
                    self.relay.publish(ToolUse(id=use.id, name=use.name, input=dict(use.input)))
            elif isinstance(event, UserMessage) and not event.is_replay:
                for result in event.tool_results:
                    self.relay.publish(ToolResult(tool_use_id=result.tool_use_id, output=result.content,
                                                  is_error=result.is_error))
            elif isinstance(event, ErrorEvent):
                self.relay.publish(Error(message=event.message))
            elif isinstance(event, Result) and not event.is_replay:
                self.record.preamble = ""  # sent with the first message
                self.record.claude_session_id = event.session_id or engine.session_id
                self.record.usage = _added(self.record.usage, event.usage)
                self.record.cost_usd += event.total_cost_usd or 0.0
                await self.on_message(self, "agent", event.result or "")  # kept before anyone hears of it
                self._busy = False  # likewise: a status asked for after `done` says stable
                self.last_used = anyio.current_time()  # and --max-live, asked next, sees this turn as the latest
                self.record.last_activity = datetime.now(UTC)  # as a client told `done` reads it (saved just after)
                self.relay.publish(Done(usage=dict(event.usage), cost_usd=event.total_cost_usd,
                                        is_error=event.is_error, result=event.result))
                self.relay.publish(Status(state="idle"))
                await self.on_change(self)
                return
        raise RuntimeError("claude's stream ended before the turn did")

    # -- the guard and the questions ------------------------------------------------------------------
    async def _guard(self, hook: HookInput) -> HookOutput | None:
        name, tool_input = hook.tool_name or "", dict(hook.tool_input or {})
        allowed = self.record.options.get("allowed_tools")
        if allowed is not None and name not in allowed and name != ASK:
            self.tool_log.denied(hook.tool_use_id)
            return HookOutput(permission="deny", reason=f"{name} is not among the tools this session may use "
                                                        f"({', '.join(allowed) or 'none'})")
        if name in FILE_TOOLS:
            target = Path(str(tool_input.get(FILE_TOOLS[name]) or ""))
            resolved = (self.workspace.path / target).resolve() if not target.is_absolute() else target.resolve()
            if resolved != self.workspace.path and self.workspace.path not in resolved.parents:
                self.tool_log.denied(hook.tool_use_id)
                return HookOutput(permission="deny", reason=f"{name} may only change files inside the workspace "
                                                            f"{self.workspace.path}; {target} is outside it")
        return None

    async def _permission(self, name: str, tool_input: Mapping[str, Any], context: PermissionContext) -> Allow | Deny:
        if name != ASK:
            return Allow()  # the guard has already kept it inside the workspace and the allowed tools
        question_id = secrets.token_hex(8)
        pending = self._questions[question_id] = _Pending(list(tool_input.get("questions") or []))
        self.relay.publish(Question(question_id=question_id, questions=pending.questions))
        self.relay.publish(Status(state="waiting"))
        with anyio.move_on_after(self.question_timeout):
            await pending.answered.wait()
        answered = pending.answered.is_set()
        pending.answered.set()  # a late answer finds the question closed
        self.relay.publish(Status(state="streaming"))
        if not answered:
            return Deny(f"the user did not answer within {self.question_timeout:g} s; go on without the answer, "
                        "or ask again later")
        return Allow(updated_input={**tool_input, "answers": pending.answers})

    def describe(self) -> dict[str, Any]:
        return self.record.describe(str(self.workspace.path), self.state)

    @property
    def state(self) -> str:
        for logged in reversed(self.relay.log):
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
