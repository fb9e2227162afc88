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
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, replace
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from frobozz import _spans
from frobozz._tasks import first_leaf
from frobozz.engine import EngineOptions, WarmSpare
from frobozz.engine.observers import ToolCall
from frobozz.memory import DatabaseError, MemoryService, MemorySettings, TranscriptStore, unstorable

from ._answers import Answers
from ._context import preamble
from ._events import AgentEvent, Done, Logged, Question, Status
from ._files import MAX_IMAGES, block, checked, inline
from ._history import changes, commit, turn_files
from ._leases import Leases
from ._memory import MemoryServers, memory_loop, memory_option, memory_options
from ._notify import Notifier
from ._options import session_options
from ._placement import Placement
from ._relay import Relay
from ._session import AgentSession
from ._store import AgentStore, SessionRecord
from ._workspaces import Workspace, Workspaces
from .exceptions import AgentError, BusyError, HistoryError, InputError, SessionNotFoundError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent")


class Agent:
    """The layer an app's backend talks to (see the module): sessions in workspaces, kept in Postgres."""

    def __init__(
        self,
        settings: AgentSettings | None = None,
        *,
        engine_options: EngineOptions | None = None,
        memory: MemorySettings | None = None,
        memory_servers: MemoryServers | None = None,
        accounts: bool | None = None,
    ) -> None:
        """`memory_servers`: the MCP servers (cortex) a session with memory on also gets, storing into its
        namespace; without them the loop still orients and recalls, but suggests nothing to store.
        `accounts`: run each claude as its workspace's owner (None: when the service is root, as it must)."""
        self.settings = settings or AgentSettings()
        if self.settings.workspaces is None:
            raise AgentError("the agent service needs a workspaces root (--workspaces ROOT)")
        self.workspaces = Workspaces(
            self.settings.workspaces, self.settings.platform_dir, first_uid=self.settings.first_uid, accounts=accounts
        )
        self.engine_options = engine_options or EngineOptions(model=self.settings.claude_model)
        self.memory = memory or MemorySettings()
        self.memory_servers = memory_servers
        self.memory_service = MemoryService(self.memory)
        self.store: AgentStore | None = None
        self.transcripts: TranscriptStore | None = None
        self.leases: Leases | None = None
        self.notifier: Notifier | None = None
        self.instance = secrets.token_hex(8)  # this instance, among those on the same database
        self._live: dict[str, AgentSession] = {}  # every session this instance serves (held or followed)
        self._loading = anyio.Lock()
        self._answers: Answers | None = None  # to the sessions' questions, given on whichever instance
        self._tg: TaskGroup | None = None
        self.failure: Exception | None = None  # what stopped the service, when a task of its own failed
        self.closing = False  # from the start of its exit
        self._placement = Placement(self.settings, self._live, self.session)  # where their claudes run
        self.spare = self._placement.spare  # the next claude, started ahead of need (counted under max_live)

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> Agent:
        self.store = await AgentStore.open(self.memory)
        try:
            self.transcripts = await TranscriptStore.on(self.store.pool)
        except BaseException:
            await self.store.aclose()
            raise
        self.leases = Leases(self.store.pool, self.instance, self.settings.lease_ttl)
        self._answers = Answers(self.leases)
        self.notifier = Notifier(self.store.pool, self.settings, self.instance)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._placement.start(self.leases, self.store, self._tg)
        self._tg.start_soon(self.notifier.outbox.deliver_forever)  # from the outbox: whichever instance wrote them
        self._tg.start_soon(self._placement.reap_idle)
        self._tg.start_soon(partial(self.leases.listen, self._heard_of, ready=self._placement.look_for_claims))
        self._tg.start_soon(self._placement.keep_leases)
        self._tg.start_soon(self._placement.look_around)
        self._tg.start_soon(self._placement.fence)
        if self.spare is not None:
            await self.spare.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closing = True
        async with AsyncExitStack() as steps:  # run last to first, each however the ones before it ended
            steps.push_async_callback(self._close_stores)
            assert self._tg is not None
            steps.push_async_callback(self._leave, self._tg)
            if self.spare is not None:  # its task group was entered after the service's: it is left first
                steps.push_async_callback(self._leave, self.spare)
            with anyio.CancelScope(shield=True):
                await self._placement.hand_over_all()
                for session in list(self._live.values()):
                    session.relay.close()

    async def _leave(self, group: TaskGroup | WarmSpare) -> None:
        """The service's tasks (or the spare's) cancelled and waited for. One that failed (the lease keeper, the
        listener...: a bug, as they wait out a database that is away) has stopped the service: it is kept in
        `failure` (the service's own over the spare's), logged, and raised."""
        if isinstance(group, TaskGroup):
            group.cancel_scope.cancel()  # (a spare cancels its own)
        try:
            await group.__aexit__(None, None, None)  # (cancelled with a failed group of ours: that is no failure)
        except Exception as e:
            self.failure = first_leaf(e)
            log.critical(
                "the agent service has stopped: %s: %s (another instance takes its sessions up)",
                type(self.failure).__name__,
                self.failure,
            )
            raise

    async def _close_stores(self) -> None:
        with anyio.CancelScope(shield=True):  # in full, whatever cancels this task meanwhile (each close is bounded)
            async with AsyncExitStack() as closes:
                closes.push_async_callback(self.memory_service.aclose)
                if self.store is not None:
                    closes.push_async_callback(self.store.aclose)
                if self.notifier is not None:
                    closes.push_async_callback(self.notifier.aclose)

    # -- the API --------------------------------------------------------------------------------------
    async def create_session(
        self,
        workspace: object,
        history: Sequence[Mapping[str, Any]] | None = None,
        attached: Sequence[Mapping[str, Any]] | None = None,
        *,
        token: str | None = None,
        **options: Any,
    ) -> str:
        """A new session in `user/name` (made if missing); `history` an app's own conversation to restore,
        `attached` documents the user picked; `token` the name of the scoped token that asked (its webhooks get
        the session's notifications); options: model, allowed_tools, max_turns, max_budget_usd, and
        memory={"namespace": NS}, the memory loop around every turn."""
        options = session_options(options)
        if options.get("memory") is not None:
            options["memory"] = await memory_option(options["memory"], self.memory_service)
        space = self.workspaces.resolve(workspace)
        text = preamble(space, history, attached, inline_chars=self.settings.attach_inline_chars)
        assert self.store is not None and self.leases is not None
        record = await self.store.add(
            SessionRecord(
                id=secrets.token_hex(16),
                workspace=space.spec,
                owner=space.user,
                token=token,
                options={k: v for k, v in options.items() if v is not None},
                preamble=text,
            )
        )
        first = [Logged(seq=1, event=Status(state="idle"))]
        await self.leases.log(record.id, None, first)  # before any instance holds it: no one else can write
        async with self._loading:
            session = self._open(record, first, space)
        try:
            session.prime()
        except OSError as e:  # only a head start: the session is kept, and its first turn says what fails
            log.warning("session %s: its claude was not started ahead: %s", record.id, e)
        return record.id

    async def send_message(
        self, session_id: str, text: str, *, workspace: str | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Queue a message, then the events of its turn (from the status that begins it), to its Done."""
        session = await self.session(session_id, workspace=workspace)
        after = session.relay.last_seq
        message_id = await self.post_message(session, text)
        begun = False
        async for logged in session.relay.follow(after):
            event = logged.event
            begun = begun or (isinstance(event, Status) and event.message_id == message_id)
            if begun:
                yield event
                if (
                    isinstance(event, (Done, Status))
                    and event.message_id == message_id
                    and (isinstance(event, Done) or event.state == "idle")
                ):
                    return

    async def post_message(
        self,
        session: AgentSession,
        text: object,
        *,
        images: Sequence[Any] | None = None,
        files: Sequence[Any] | None = None,
        alone: bool = False,
    ) -> str:
        """Queue a message (answered after those before it, on whichever instance runs the session); its id.
        `images` inline ({"media_type", "data": base64}), `files` ids of images uploaded to the session: all
        checked before anything is kept; with either, `text` may be None (none). `alone` (agentapi's rule): only
        while no other message of the session waits or is being answered, else BusyError and nothing is kept."""
        images, files = list(images or ()), list(files or ())
        if text is None and (images or files):
            text = ""
        if not isinstance(text, str) or not (text.strip() or images or files):
            raise InputError("a message needs some text (or an image)")
        if unstorable(text):  # (the database refused it, and the client was told the database was away)
            raise InputError("a message cannot hold a NUL character or an unpaired \\ud800-\\udfff escape")
        if len(images) + len(files) > MAX_IMAGES:
            raise InputError(f"at most {MAX_IMAGES} images in a message")
        decoded = [inline(image) for image in images]
        assert self.leases is not None and self.store is not None
        if files:
            if not all(isinstance(f, str) and f.isalnum() for f in files):
                raise InputError("files are the ids POST /sessions/ID/files gave")
            missing = set(files) - await self.store.file_ids(session.id, files)
            if missing:
                raise InputError(f"no file {sorted(missing)[0][:64]} in this session")
        for media_type, data in decoded:
            files.append(await self._keep_file(session, media_type, data))
        message_id = secrets.token_hex(8)
        if not await self.leases.post(session.id, message_id, text, files, alone=alone):
            raise BusyError("the agent is running; send when its status is stable")
        if session.owned:
            await self._placement.pump(session)
        else:
            await self._placement.claim(session.id)  # here, when no other instance runs it and there is room
        return message_id

    async def add_file(
        self, session_id: str, media_type: Any, data: bytes, *, owners: Collection[str] | None = None
    ) -> dict[str, Any]:
        """An image uploaded for the session's next messages (checked: its type by its bytes, its size)."""
        session = await self.session(session_id, owners=owners)
        media_type = checked(media_type, data)
        return {
            "file_id": await self._keep_file(session, media_type, data),
            "media_type": media_type,
            "size": len(data),
        }

    async def _keep_file(self, session: AgentSession, media_type: str, data: bytes) -> str:
        assert self.store is not None
        file_id = secrets.token_hex(16)
        await self.store.add_file(session.id, file_id, media_type, data)
        return file_id

    async def _images(self, session: AgentSession, files: list[str]) -> list[dict[str, Any]]:
        assert self.store is not None
        return [block(media_type, data) for media_type, data in await self.store.files(session.id, files)]

    async def answer(
        self,
        session_id: str,
        question_id: str,
        answers: Mapping[str, Any],
        *,
        workspace: str | None = None,
        owners: Collection[str] | None = None,
    ) -> None:
        """Answer a question the session asked (on whichever instance): the first answer counts."""
        if not isinstance(answers, Mapping) or not answers:
            raise InputError("answers are an object: each question's text, and the answer chosen")
        session = await self.session(session_id, workspace=workspace, owners=owners)
        assert self._answers is not None
        await self._answers.give(session, question_id, answers)

    async def interrupt(
        self, session_id: str, *, workspace: str | None = None, owners: Collection[str] | None = None
    ) -> None:
        session = await self.session(session_id, workspace=workspace, owners=owners)
        if session.owned:
            await session.interrupt()
        else:
            assert self.leases is not None
            await self.leases.notify("interrupt", session.id)

    async def close_session(self, session_id: str, *, workspace: str | None = None) -> None:
        session = await self.session(session_id, workspace=workspace)
        assert self.store is not None and self.leases is not None
        await self.store.delete(session_id)  # its lease, inbox and events with it
        await self._closed(session)
        await self.leases.notify("close", session_id)

    async def _closed(self, session: AgentSession) -> None:
        session.disown()
        await session.release()
        session.relay.close(Status(state="closed"))
        self._live.pop(session.id, None)

    async def follow(
        self, session_id: str, after: int = 0, kinds: Collection[str] | None = None, *, workspace: str | None = None
    ) -> AsyncIterator[Logged]:
        session = await self.session(session_id, workspace=workspace)
        async for logged in session.relay.follow(after, kinds):
            yield logged

    async def last_event(self, session: AgentSession) -> int:
        """The number of the session's last event, on whichever instance it was written (this one may not have read
        it back yet)."""
        assert self.leases is not None
        return max(session.relay.last_seq, await self.leases.last_event(session.id))

    async def sessions(self, owners: Collection[str] | None = None) -> list[dict[str, Any]]:
        assert self.store is not None
        found = []
        for record in await self.store.list(sorted(owners) if owners is not None else None):
            live = self._live.get(record.id)
            found.append(
                live.describe()
                if live and live.owned
                else record.describe(
                    str(self.workspaces.root / record.workspace), live.state if live else record.status
                )
            )
        return found

    async def describe(self, session: AgentSession) -> dict[str, Any]:
        """What the API says of a session; its record read again when another instance runs it."""
        if not session.owned:
            assert self.store is not None
            record = await self.store.get(session.id)
            if record is not None:
                session.record = record
        return session.describe()

    async def tool_calls(self, session_id: str, *, workspace: str | None = None) -> list[dict[str, Any]]:
        await self.session(session_id, workspace=workspace)
        assert self.store is not None
        return await self.store.tool_calls(session_id)

    async def session(
        self, session_id: str, *, workspace: str | None = None, owners: Collection[str] | None = None
    ) -> AgentSession:
        """The session (loaded from the database: made on another instance, or before a restart); refused
        under another workspace or user."""
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
        if (workspace is not None and session.record.workspace != workspace) or (
            owners is not None and session.record.owner not in owners
        ):
            raise SessionNotFoundError(f"no session {session_id} in that workspace")  # never says whose it is
        return session

    # -- inside ---------------------------------------------------------------------------------------
    def _open(self, record: SessionRecord, history: list[Logged], space: Workspace | None = None) -> AgentSession:
        """A session this instance serves (its events followed; run only once it holds the lease); `space` its
        workspace when the caller has just resolved it."""
        assert self._tg is not None and self.leases is not None and self._answers is not None
        leases, tg = self.leases, self._tg

        async def persist(batch: list[Logged], token: int) -> None:
            await leases.log(record.id, token, batch)  # then, once, from the instance that wrote them:
            for logged in batch:
                if isinstance(logged.event, (Question, Done)):
                    tg.start_soon(self._notify, record, logged)

        relay = Relay(history, persist=persist, on_lost=lambda: self._placement.lost(session))
        space = space or self.workspaces.resolve(record.workspace)
        session = AgentSession(
            record,
            space,
            relay,
            workspaces=self.workspaces,
            options=self._engine_options(),
            question_timeout=self.settings.question_timeout,
            on_change=self._changed,
            on_tool_call=self._tool_call,
            on_message=self._message,
            answers=self._answers.wait,
            on_turn=self._commit,
            images=self._images,
            memory_loop=partial(
                memory_loop, service=self.memory_service, servers=self.memory_servers, spare=self.spare
            ),
            memory_options=partial(memory_options, servers=self.memory_servers),
            spare=self.spare,
        )
        self._live[record.id] = session
        self._tg.start_soon(relay.keep)
        return session

    async def _notify(self, record: SessionRecord, logged: Logged) -> None:
        assert self.notifier is not None
        try:
            await self.notifier.notify(record.id, record.owner, logged, token=record.token)
        except DatabaseError as e:
            log.warning("session %s: no notification for event %d: %s", record.id, logged.seq, e)

    def _engine_options(self) -> EngineOptions:
        return replace(
            self.engine_options,
            session_store=self.transcripts,
            session_store_flush="batched",
            trace_attributes={**self.engine_options.trace_attributes, _spans.SESSION_KIND: "agent"},
        )

    async def _changed(self, session: AgentSession, token: int) -> None:
        """The session's record saved, under `token`, the lease of the driver that changed it."""
        assert self.store is not None
        session.record.status = session.state
        await self.store.update(session.record, token)

    async def _message(
        self, session: AgentSession, role: str, content: str, token: int, *, interrupted: bool = False
    ) -> None:
        assert self.store is not None
        await self.store.add_message(session.id, role, content, session.current, token, interrupted=interrupted)

    async def messages(self, session_id: str, *, owners: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The conversation as people see it: what the user sent and what the agent answered, in order."""
        await self.session(session_id, owners=owners)
        assert self.store is not None
        return await self.store.messages(session_id)

    async def changes(self, session_id: str, *, owners: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The session's commits in its workspace's git history, newest first (none when it is no repository)."""
        session = await self.session(session_id, owners=owners)
        return await changes(session.workspace, session.id)

    async def _commit(self, session: AgentSession, first_line: str, targets: list[str]) -> None:
        """A turn's files into the workspace's history (when it is a git repository), one commit at a time."""
        assert self.store is not None
        try:
            await commit(
                self.store.pool,
                session.workspace,
                user=session.record.owner,
                session_id=session.id,
                first_line=first_line,
                paths=turn_files(session.workspace, targets),
            )
        except HistoryError as e:
            log.warning("session %s: the turn's files are not committed: %s", session.id, e)

    def _tool_call(self, session: AgentSession, call: ToolCall) -> None:
        assert self._tg is not None
        n = session.tool_base + len(session.tool_log.calls)
        self._tg.start_soon(self._log_tool_call, session, n, call, session.relay.token)

    async def _log_tool_call(self, session: AgentSession, n: int, call: ToolCall, token: int | None) -> None:
        """A call into the session's tool log, under the lease its turn ran under (as its events are). Written
        beside the turn, in the service's task group: a database error is said here, not raised there (it
        would end the service, every session with it)."""
        assert self.store is not None
        try:
            await self.store.add_tool_call(session.id, n, asdict(call), token)
        except DatabaseError as e:
            log.warning("session %s: tool call %d is not in its tool log: %s", session.id, n, e)

    # -- among instances -------------------------------------------------------------------------------
    async def _heard_of(self, kind: str, session_id: str) -> None:
        """What another instance (or this one) said through the database."""
        assert self._tg is not None and self._answers is not None
        session = self._live.get(session_id)
        if kind == "events" and session is not None:
            await self._placement.sync(session)
        elif kind == "inbox":
            if session is not None and session.owned:
                await self._placement.pump(session)
            else:
                self._tg.start_soon(self._placement.claim, session_id)
        elif kind == "answer":
            self._answers.heard(session_id)
        elif kind == "interrupt" and session is not None and session.owned:
            await session.interrupt()
        elif kind == "close" and session is not None:
            await self._closed(session)
