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
import re
import secrets
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import asdict, replace
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from frobozz import _spans
from frobozz.engine import EngineOptions, WarmSpare
from frobozz.engine.observers import ToolCall
from frobozz.loop import MemorySession
from frobozz.memory import DatabaseError, MemoryService, MemorySettings, MemoryStoreError, TranscriptStore

from ._context import preamble
from ._events import AgentEvent, Done, Error, Logged, Question, Status
from ._files import MAX_IMAGES, block, checked, inline
from ._history import changes, commit, turn_files
from ._leases import Leases
from ._notify import Notifier
from ._relay import Relay
from ._session import AgentSession
from ._store import AgentStore, SessionRecord
from ._workspaces import Workspace, Workspaces
from .exceptions import AgentError, BusyError, HistoryError, InputError, QuestionError, SessionNotFoundError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent")
OPTIONS = ("model", "allowed_tools", "max_turns", "max_budget_usd", "memory")
QUESTION_ID = re.compile(r"[0-9A-Za-z]{1,64}")  # made as 16 hex digits: an id unlike one was never asked
MemoryServers = Callable[[str], Mapping[str, Mapping[str, Any]]]  # a namespace -> MCP servers that store into it


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
        self._syncing: dict[str, anyio.Lock] = {}
        self._claiming: dict[str, anyio.Lock] = {}  # a session's claims one at a time (`_claim`)
        self._heard: dict[str, anyio.Event] = {}  # a session's answers changed (told by whichever instance)
        self._claims = anyio.Event()  # look for sessions that need an instance now
        self._closing = False  # shutting down: sessions handed over are not taken up again here
        self._tg: TaskGroup | None = None
        # the next claude, started ahead of need; it counts under max_live and is the first to go for room
        self._wanting_room = 0  # sessions in _acquire: a spare waits while they do (it would take their room)
        self.spare = WarmSpare(room=self._room_for_spare) if self.settings.warm_spare else None

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> Agent:
        self.store = await AgentStore.open(self.memory)
        try:
            self.transcripts = await TranscriptStore.on(self.store.pool)
        except BaseException:
            await self.store.aclose()
            raise
        self.leases = Leases(self.store.pool, self.instance, self.settings.lease_ttl)
        self.notifier = Notifier(self.store.pool, self.settings, self.instance)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.notifier.outbox.deliver_forever)  # from the outbox: whichever instance wrote them
        self._tg.start_soon(self._reap_idle)
        self._tg.start_soon(partial(self.leases.listen, self._heard_of, ready=self._claims.set))
        self._tg.start_soon(self._keep_leases)
        if self.spare is not None:
            await self.spare.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True
        try:
            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as tg:  # all at once, within one bound
                    for session in [s for s in self._live.values() if s.owned]:
                        tg.start_soon(self._hand_over, session)
                for session in list(self._live.values()):
                    session.relay.close()
        finally:
            if self.spare is not None:  # its task group was entered after the service's: it is left first
                await self.spare.__aexit__(None, None, None)
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            if self.notifier is not None:
                await self.notifier.aclose()
            if self.store is not None:
                await self.store.aclose()
            await self.memory_service.aclose()

    async def _hand_over(self, session: AgentSession) -> None:
        """At shutdown: a held session's claudes closed (within the bound), then its lease handed over at once,
        so the next instance takes its turn over; a claude still running keeps the lease until it lapses
        (no other instance resumes a transcript that is still being written), and is stopped with the tg."""
        token = session.relay.token
        session.disown()  # nothing more said here
        if not await session.release(self.settings.shutdown_timeout):
            log.warning(
                "session %s: its claude did not close within %g s: stopped, its lease left to lapse",
                session.id,
                self.settings.shutdown_timeout,
            )
        elif token is not None and self.leases is not None:
            try:
                with anyio.move_on_after(5):
                    await self.leases.release(session.id, token, force=True)
            except DatabaseError as e:
                log.warning("session %s: its lease is not handed over (%s); it lapses", session.id, e)

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
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise InputError(f"unknown session options: {', '.join(sorted(unknown))}")
        if options.get("memory") is not None:
            options["memory"] = await self._memory_option(options["memory"])
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
        session.prime()
        return record.id

    async def _memory_option(self, memory: Any) -> dict[str, str]:
        if not isinstance(memory, Mapping) or set(memory) != {"namespace"} or not isinstance(memory["namespace"], str):
            raise InputError('memory is {"namespace": NAME}: the namespace the session remembers in')
        try:
            return {"namespace": (await self.memory_service.store()).namespace(memory["namespace"])}
        except MemoryStoreError as e:
            raise InputError(str(e)) from e

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
        checked before anything is kept. `alone` (agentapi's rule): only while no other message of the session
        waits or is being answered, else BusyError and nothing is kept."""
        images, files = list(images or ()), list(files or ())
        if not isinstance(text, str) or not (text.strip() or images or files):
            raise InputError("a message needs some text (or an image)")
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
            await self._pump(session)
        else:
            await self._claim(session.id)  # here, when no other instance runs it and there is room
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
        assert self.leases is not None
        known = isinstance(question_id, str) and QUESTION_ID.fullmatch(question_id)  # else never asked
        if not known or not await self.leases.answer(session.id, question_id, dict(answers)):
            raise QuestionError(
                f"question {str(question_id)[:64]} is not waiting for an answer (answered, timed out, or never asked)"
            )

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
        assert self._tg is not None and self.leases is not None
        leases, tg = self.leases, self._tg

        async def persist(batch: list[Logged], token: int) -> None:
            await leases.log(record.id, token, batch)  # then, once, from the instance that wrote them:
            for logged in batch:
                if isinstance(logged.event, (Question, Done)):
                    tg.start_soon(self._notify, record, logged)

        relay = Relay(history, persist=persist, on_lost=lambda: self._lost(session))
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
            answers=self._answers,
            on_turn=self._commit,
            images=self._images,
            memory_loop=self._memory_loop,
            memory_options=self._memory_options,
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

    def _memory_options(self, options: EngineOptions, namespace: str) -> tuple[EngineOptions, bool]:
        """The options of a memory session's claude (cortex storing into its namespace, when there is one), and
        whether the model can store."""
        servers = dict(self.memory_servers(namespace)) if self.memory_servers else {}
        if servers:
            config = dict(options.mcp_config or {}) if isinstance(options.mcp_config, Mapping) else {}
            options = replace(options, mcp_config={"mcpServers": {**config.get("mcpServers", {}), **servers}})
        return options, bool(servers)

    def _memory_loop(self, options: EngineOptions, namespace: str, resume: str | None) -> MemorySession:
        """The memory loop around a session's claude: orientation, recall, the archive, and (when the model can
        store) suggestions. Its sidecar is a bare claude of the same account: no tools, no MCP servers."""
        options, can_store = self._memory_options(options, namespace)
        sidecar = replace(
            options,
            tools=(),
            mcp_config=None,
            strict_mcp_config=True,
            hooks={},
            can_use_tool=None,
            allowed_tools=(),
            session_store=None,
            include_partial_messages=False,
            max_turns=None,
            max_budget_usd=None,
        )
        return MemorySession(
            options,
            self.memory_service,
            namespace=namespace,
            client="frobozz agent",
            resume=resume,
            sidecar=sidecar,
            suggest=can_store,
            spare=self.spare,
        )

    async def _changed(self, session: AgentSession) -> None:
        assert self.store is not None
        session.record.status = session.state
        if session.relay.token is not None:
            await self.store.update(session.record, session.relay.token)

    async def _message(self, session: AgentSession, role: str, content: str) -> None:
        assert self.store is not None
        await self.store.add_message(session.id, role, content, session.current)

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
        assert self._tg is not None and self.store is not None
        n = session.tool_base + len(session.tool_log.calls)
        self._tg.start_soon(self.store.add_tool_call, session.id, n, asdict(call))

    async def _answers(self, session: AgentSession, question_id: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109 - None when none came: not an error
        """A question's answers, given on whichever instance (None: none came in `timeout` seconds)."""
        assert self.leases is not None
        deadline = anyio.current_time() + timeout
        while True:
            heard = self._heard.setdefault(session.id, anyio.Event())
            closed, answers = await self.leases.answer_of(session.id, question_id)
            if closed:
                return answers
            if anyio.current_time() >= deadline:
                if await self.leases.answer(session.id, question_id, None):
                    return None
                continue  # answered just now
            with anyio.move_on_after(min(2.0, max(0.0, deadline - anyio.current_time()))):
                await heard.wait()  # (a missed notification costs at most two seconds)
            if heard.is_set() and self._heard.get(session.id) is heard:
                self._heard[session.id] = anyio.Event()

    async def _acquire(self, session: AgentSession) -> None:
        """Room for one more claude: past --max-live, the least recently used idle one is let go first."""
        need = min(session.claudes, self.settings.max_live)  # a session bigger than the bound runs alone
        self._wanting_room += 1
        try:
            await self._room_for(session, need)
        finally:
            self._wanting_room -= 1
        session.reserved = True

    async def _room_for(self, session: AgentSession, need: int) -> None:
        while True:  # no await between the last check and the reservation: two sessions cannot both pass
            if self._claudes() + need > self.settings.max_live:
                idle = [s for s in self._live.values() if s.engine is not None and not s.busy and s is not session]
                if idle:
                    await self._let_go(min(idle, key=lambda s: s.last_used))
                else:
                    await anyio.sleep(0.05)  # every claude is mid-turn: wait for one to finish
                continue
            spare = self.spare
            if spare is not None and spare.live and self._claudes() + need + spare.live > self.settings.max_live:
                options = session.launch_options()
                if options is None or not spare.fits(options):  # not this session's: it goes first, and is gone
                    await spare.clear()  # before this session's claude starts
                    continue
            return

    def _room_for_spare(self) -> bool:
        """A spare counts under --max-live, and waits while a session wants room."""
        return not self._wanting_room and self._claudes() + 1 <= self.settings.max_live

    def _claudes(self) -> int:
        """claude processes the live sessions hold or are starting (the spare's not among them)."""
        return sum(s.claudes for s in self._live.values() if s.engine is not None or s.reserved)

    async def _reap_idle(self) -> None:
        every = max(0.05, min(5.0, self.settings.idle_timeout / 4))
        while True:
            await anyio.sleep(every)
            now = anyio.current_time()
            for session in list(self._live.values()):
                if (
                    session.engine is not None
                    and not session.busy
                    and now - session.last_used > self.settings.idle_timeout
                ):
                    log.info("session %s idle for %.0f s: its claude is released", session.id, now - session.last_used)
                    await self._let_go(session)

    # -- among instances -------------------------------------------------------------------------------
    async def _let_go(self, session: AgentSession) -> None:
        """Release the session's claude, and its lease unless messages wait (the next message, on any instance,
        takes it up again)."""
        assert self.leases is not None
        token = session.relay.token
        if token is not None and not session.busy:
            try:
                if await self.leases.release(session.id, token):
                    session.disown()
            except DatabaseError as e:
                log.warning("session %s: its lease is not given up (%s); it expires", session.id, e)
        await session.release()

    def _lost(self, session: AgentSession) -> None:
        """Another instance holds the session now: this one stops running it (its followers stay)."""
        log.warning("session %s: the lease was lost; another instance runs it now", session.id)
        session.disown()
        assert self._tg is not None
        self._tg.start_soon(session.release)

    def _room(self) -> bool:
        """Room here under --max-live for one more session's turn (idle claudes can be let go)."""
        running = sum(s.claudes for s in self._live.values() if s.owned and (s.busy or s.reserved))
        return running + 1 <= self.settings.max_live

    async def _claim(self, session_id: str) -> None:
        """Run the session here when no instance does and there is room: catch its log up, say that a turn cut
        short elsewhere was taken over, and answer what waits in its inbox."""
        # One claim of a session at a time: a message's poster returns only once the claim its own notice started
        # is through (the session run here, its message queued), not while it is under way, when the session
        # looked idle to anyone asking (agentapi's status said stable with three messages posted)
        lock = self._claiming.setdefault(session_id, anyio.Lock())
        try:
            async with lock:
                await self._claim_here(session_id)
        finally:
            if not lock.locked() and self._claiming.get(session_id) is lock:  # none holds it, none waits for it
                del self._claiming[session_id]  # (kept, every session ever heard of would stay here)

    async def _claim_here(self, session_id: str) -> None:
        assert self.leases is not None and self.store is not None and self._tg is not None
        token: int | None = None
        try:
            if self._closing or not self._room():  # closing: its own hand-over's notice must not take it back
                return
            token = await self.leases.acquire(session_id)
            if token is None:
                return
            session = await self.session(session_id)
            if session.owned:
                session.disown()  # an older lease of ours that lapsed
                await session.release()
            record = await self.store.get(session_id)
            if record is None:
                return
            session.record = record
            await self._sync(session)
            session.tool_base = len(await self.store.tool_calls(session_id))
            session.inbox_after = 0
            session.claim(token, self._acquire, self._tg)
            token = None  # the session's now: its driver lets the lease go
            if session.state in ("streaming", "waiting"):
                log.warning("session %s: its turn was cut short on another instance; taken over", session_id)
                session.relay.publish(
                    Error(
                        message="the instance running this turn stopped; another instance took "
                        "the session over and answers the message again"
                    )
                )
                session.relay.publish(Status(state="idle"))
            await self._pump(session)
        except (AgentError, DatabaseError) as e:
            log.warning("session %s not taken up here: %s", session_id, e)
        finally:
            if token is not None:  # taken, then the claim failed: renewed with the rest, it would strand the session
                self._tg.start_soon(self._give_up_lease, session_id, token)

    async def _give_up_lease(self, session_id: str, token: int) -> None:
        """The lease of a claim that failed, given up after a pause: its notice starts the next claim (here or
        elsewhere), and a failure that persists is not tried again at once, over and over."""
        assert self.leases is not None
        await anyio.sleep(self.settings.lease_ttl / 3)  # (at shutdown, cancelled: the lease lapses with the rest)
        try:
            with anyio.move_on_after(self.settings.lease_ttl):
                await self.leases.release(session_id, token, force=True)
        except DatabaseError as e:
            log.warning("session %s: the lease of a failed claim not given up (it lapses): %s", session_id, e)

    async def _pump(self, session: AgentSession) -> None:
        """Hand the driver what waits in the session's inbox, in the order it was accepted."""
        assert self.leases is not None
        async with self._syncing.setdefault(f"inbox:{session.id}", anyio.Lock()):
            if not session.owned:
                return
            for position, message_id, text, files in await self.leases.waiting(session.id, session.inbox_after):
                session.enqueue(message_id, text, files)
                session.inbox_after = position

    async def _sync(self, session: AgentSession) -> None:
        """The events other instances wrote since this one last looked."""
        assert self.leases is not None
        async with self._syncing.setdefault(session.id, anyio.Lock()):
            if not session.owned:
                session.relay.sync(await self.leases.events_after(session.id, session.relay.last_seq))

    async def _heard_of(self, kind: str, session_id: str) -> None:
        """What another instance (or this one) said through the database."""
        assert self._tg is not None
        session = self._live.get(session_id)
        if kind == "events" and session is not None:
            await self._sync(session)
        elif kind == "inbox":
            if session is not None and session.owned:
                await self._pump(session)
            else:
                self._tg.start_soon(self._claim, session_id)
        elif kind == "answer" and session_id in self._heard:
            self._heard[session_id].set()
        elif kind == "interrupt" and session is not None and session.owned:
            await session.interrupt()
        elif kind == "close" and session is not None:
            await self._closed(session)

    async def _keep_leases(self) -> None:
        """Renew this instance's leases (one it lost is let go at once), catch up what a missed notification
        would have said, and take up sessions whose instance is gone."""
        assert self.leases is not None and self._tg is not None
        every = max(0.2, self.settings.lease_ttl / 3)
        while True:
            try:
                held = await self.leases.renew()
                for session in list(self._live.values()):
                    token = session.relay.token
                    if (
                        session.owned
                        and held.get(session.id) != token
                        and await self.leases.holder(session.id) != token
                        and session.relay.token == token
                    ):
                        self._lost(session)  # (asked again: a lease taken just after the renewal is not lost)
                    elif not session.owned and not session.relay.closed:
                        await self._sync(session)
                for session_id in await self.leases.unclaimed():
                    self._tg.start_soon(self._claim, session_id)
            except DatabaseError as e:
                log.warning("the agent's leases not renewed: %s", e)
            with anyio.move_on_after(every):
                await self._claims.wait()
            self._claims = anyio.Event()
