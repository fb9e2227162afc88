"""`Agent`: the layer an app's backend talks to. Sessions in workspaces, messages answered in order, questions
to the user, interrupts; each session's events on one relay that any number of clients follow; everything
kept in Postgres, so a session outlives the service (its claude session resumes from the transcript store).

    async with Agent(settings) as agent:
        session = await agent.create_session("alice/notes", history=[...], attached=[...])
        async for event in agent.send_message(session, "Tidy my notes"):
            ...
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup

from frobozz import _spans
from frobozz.engine import EngineOptions
from frobozz.engine.observers import ToolCall
from frobozz.loop import MemorySession
from frobozz.memory import MemoryService, MemorySettings, MemoryStoreError, TranscriptStore

from ._context import preamble
from ._events import AgentEvent, Done, Logged, Status
from ._relay import Relay
from ._session import AgentSession
from ._store import AgentStore, SessionRecord
from ._workspaces import Workspace, Workspaces
from .exceptions import AgentError, InputError, SessionNotFoundError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent")
OPTIONS = ("model", "allowed_tools", "max_turns", "max_budget_usd", "memory")
MemoryServers = Callable[[str], Mapping[str, Mapping[str, Any]]]  # a namespace -> MCP servers that store into it


class Agent:
    def __init__(self, settings: AgentSettings | None = None, *, engine_options: EngineOptions | None = None,
                 memory: MemorySettings | None = None, memory_servers: MemoryServers | None = None,
                 accounts: bool | None = None) -> None:
        """`memory_servers`: the MCP servers (cortex) a session with memory on also gets, storing into its
        namespace; without them the loop still orients and recalls, but suggests nothing to store.
        `accounts`: run each claude as its workspace's owner (None: when the service is root, as it must)."""
        self.settings = settings or AgentSettings()
        if self.settings.workspaces is None:
            raise AgentError("the agent service needs a workspaces root (--workspaces ROOT)")
        self.workspaces = Workspaces(self.settings.workspaces, self.settings.platform_dir,
                                     first_uid=self.settings.first_uid, accounts=accounts)
        self.engine_options = engine_options or EngineOptions(model=self.settings.claude_model)
        self.memory = memory or MemorySettings()
        self.memory_servers = memory_servers
        self.memory_service = MemoryService(self.memory)
        self.store: AgentStore | None = None
        self.transcripts: TranscriptStore | None = None
        self._live: dict[str, AgentSession] = {}
        self._loading = anyio.Lock()
        self._tg: TaskGroup | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> Agent:
        self.store = await AgentStore.open(self.memory)
        try:
            self.transcripts = await TranscriptStore.on(self.store.pool)
        except BaseException:
            await self.store.aclose()
            raise
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._reap_idle)
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            with anyio.CancelScope(shield=True):
                for session in list(self._live.values()):
                    await session.release()
                    session.relay.close()
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            if self.store is not None:
                await self.store.aclose()
            await self.memory_service.aclose()

    # -- the API --------------------------------------------------------------------------------------
    async def create_session(self, workspace: str, history: Sequence[Mapping[str, Any]] | None = None,
                             attached: Sequence[Mapping[str, Any]] | None = None, **options: Any) -> str:
        """A new session in `user/name` (made if missing); `history` an app's own conversation to restore,
        `attached` documents the user picked; options: model, allowed_tools, max_turns, max_budget_usd, and
        memory={"namespace": NS}, the memory loop around every turn."""
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise InputError(f"unknown session options: {', '.join(sorted(unknown))}")
        if options.get("memory") is not None:
            options["memory"] = await self._memory_option(options["memory"])
        space = self.workspaces.resolve(workspace)
        text = preamble(space, history, attached, inline_chars=self.settings.attach_inline_chars)
        assert self.store is not None
        record = await self.store.add(SessionRecord(id=secrets.token_hex(16), workspace=space.spec, owner=space.user,
                                                    options={k: v for k, v in options.items() if v is not None},
                                                    preamble=text))
        session = self._open(record, [], space)
        session.relay.publish(Status(state="idle"))
        return record.id

    async def _memory_option(self, memory: Any) -> dict[str, str]:
        if not isinstance(memory, Mapping) or set(memory) != {"namespace"} or not isinstance(memory["namespace"], str):
            raise InputError('memory is {"namespace": NAME}: the namespace the session remembers in')
        try:
            return {"namespace": (await self.memory_service.store()).namespace(memory["namespace"])}
        except MemoryStoreError as e:
            raise InputError(str(e)) from e

    async def send_message(self, session_id: str, text: str, *, workspace: str | None = None
                           ) -> AsyncIterator[AgentEvent]:
        """Queue a message, then the events of its turn, to its Done."""
        session = await self.session(session_id, workspace=workspace)
        message_id = self.post_message(session, text)
        after = await session.turn_start(message_id)
        async for logged in session.relay.follow(after):
            yield logged.event
            if isinstance(logged.event, Done):
                return

    def post_message(self, session: AgentSession, text: str) -> str:
        """Queue a message (answered after those before it); its id."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("a message needs some text")
        return session.send(text)

    async def answer(self, session_id: str, question_id: str, answers: Mapping[str, Any], *,
                     workspace: str | None = None) -> None:
        if not isinstance(answers, Mapping) or not answers:
            raise InputError("answers are an object: each question's text, and the answer chosen")
        (await self.session(session_id, workspace=workspace)).answer(question_id, answers)

    async def interrupt(self, session_id: str, *, workspace: str | None = None) -> None:
        await (await self.session(session_id, workspace=workspace)).interrupt()

    async def close_session(self, session_id: str, *, workspace: str | None = None) -> None:
        session = await self.session(session_id, workspace=workspace)
        session.close()
        await session.release()
        session.relay.publish(Status(state="closed"))
        session.relay.close()
        self._live.pop(session_id, None)
        assert self.store is not None
        await self.store.delete(session_id)

    async def follow(self, session_id: str, after: int = 0, kinds: Collection[str] | None = None, *,
                     workspace: str | None = None) -> AsyncIterator[Logged]:
        session = await self.session(session_id, workspace=workspace)
        async for logged in session.relay.follow(after, kinds):
            yield logged

    async def sessions(self, owners: Collection[str] | None = None) -> list[dict[str, Any]]:
        assert self.store is not None
        found = []
        for record in await self.store.list(sorted(owners) if owners is not None else None):
            live = self._live.get(record.id)
            found.append(live.describe() if live else
                         record.describe(str(self.workspaces.root / record.workspace), record.status))
        return found

    async def tool_calls(self, session_id: str, *, workspace: str | None = None) -> list[dict[str, Any]]:
        await self.session(session_id, workspace=workspace)
        assert self.store is not None
        return await self.store.tool_calls(session_id)

    async def session(self, session_id: str, *, workspace: str | None = None,
                      owners: Collection[str] | None = None) -> AgentSession:
        """The session (loaded from the database after a restart); refused under another workspace or user."""
        if not isinstance(session_id, str) or not session_id.isalnum() or len(session_id) > 64:
            raise SessionNotFoundError("no such session")
        async with self._loading:
            session = self._live.get(session_id)
            if session is None:
                assert self.store is not None
                record = await self.store.get(session_id)
                if record is None:
                    raise SessionNotFoundError(f"no session {session_id}")
                session = self._open(record, await self.store.events(session_id))
                session.message_count = len(await self.store.messages(session_id))
        if (workspace is not None and session.record.workspace != workspace) or \
                (owners is not None and session.record.owner not in owners):
            raise SessionNotFoundError(f"no session {session_id} in that workspace")  # never says whose it is
        return session

    # -- inside ---------------------------------------------------------------------------------------
    def _open(self, record: SessionRecord, history: list[Logged], space: Workspace | None = None) -> AgentSession:
        """A session live in this service; `space` its workspace when the caller has just resolved it."""
        assert self._tg is not None and self.store is not None
        store = self.store
        relay = Relay(history, persist=lambda batch: store.log(record.id, batch))
        space = space or self.workspaces.resolve(record.workspace)
        session = AgentSession(record, space, relay, workspaces=self.workspaces,
                               options=self._engine_options(), question_timeout=self.settings.question_timeout,
                               on_change=self._changed, on_tool_call=self._tool_call, on_message=self._message,
                               memory_loop=self._memory_loop)
        self._live[record.id] = session
        self._tg.start_soon(relay.keep)
        self._tg.start_soon(session.drive, self._acquire, self._tg)
        return session

    def _engine_options(self) -> EngineOptions:
        return replace(self.engine_options, session_store=self.transcripts, session_store_flush="batched",
                       trace_attributes={**self.engine_options.trace_attributes, _spans.SESSION_KIND: "agent"})

    def _memory_loop(self, options: EngineOptions, namespace: str, resume: str | None) -> MemorySession:
        """The memory loop around a session's claude: orientation, recall, the archive, and (when the model can
        store) suggestions. Its sidecar is a bare claude of the same account: no tools, no MCP servers."""
        servers = dict(self.memory_servers(namespace)) if self.memory_servers else {}
        if servers:
            config = dict(options.mcp_config or {}) if isinstance(options.mcp_config, Mapping) else {}
            options = replace(options, mcp_config={"mcpServers": {**config.get("mcpServers", {}), **servers}})
        sidecar = replace(options, tools=(), mcp_config=None, strict_mcp_config=True, hooks={}, can_use_tool=None,
                          allowed_tools=(), session_store=None, include_partial_messages=False, max_turns=None,
                          max_budget_usd=None)
        return MemorySession(options, self.memory_service, namespace=namespace, client="frobozz agent",
                             resume=resume, sidecar=sidecar, suggest=bool(servers))

    async def _changed(self, session: AgentSession) -> None:
        assert self.store is not None
        session.record.status = session.state
        await self.store.update(session.record)

    async def _message(self, session: AgentSession, role: str, content: str) -> None:
        assert self.store is not None
        session.message_count += 1
        await self.store.add_message(session.id, session.message_count, role, content)

    async def messages(self, session_id: str, *, owners: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The conversation as people see it: what the user sent and what the agent answered, in order."""
        await self.session(session_id, owners=owners)
        assert self.store is not None
        return await self.store.messages(session_id)

    def _tool_call(self, session: AgentSession, call: ToolCall) -> None:
        assert self._tg is not None and self.store is not None
        n = len(session.tool_log.calls)
        self._tg.start_soon(self.store.add_tool_call, session.id, n, asdict(call))

    async def _acquire(self, session: AgentSession) -> None:
        """Room for one more claude: past --max-live, the least recently used idle one is let go first."""
        need = min(session.claudes, self.settings.max_live)  # a session bigger than the bound runs alone
        while sum(s.claudes for s in self._live.values() if s.engine is not None or s.reserved) + need \
                > self.settings.max_live:
            idle = [s for s in self._live.values() if s.engine is not None and not s.busy and s is not session]
            if idle:
                await min(idle, key=lambda s: s.last_used).release()
            else:
                await anyio.sleep(0.05)  # every claude is mid-turn: wait for one to finish
        session.reserved = True

    async def _reap_idle(self) -> None:
        every = max(0.05, min(5.0, self.settings.idle_timeout / 4))
        while True:
            await anyio.sleep(every)
            now = anyio.current_time()
            for session in list(self._live.values()):
                if session.engine is not None and not session.busy \
                        and now - session.last_used > self.settings.idle_timeout:
                    log.info("session %s idle for %.0f s: its claude is released", session.id, now - session.last_used)
                    await session.release()
