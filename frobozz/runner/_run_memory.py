"""A run's memory (`play --memory`): cortex and handoff as the player's tools, the orientation that opens
every context window, recall under the status line, hand-off between windows, and the lessons kept for
the next run. It is help, never a gate: a part that fails (the database away) is left out with a log
line, and the game goes on as without memory; a database that hangs turns memory off for the run's
service (said once, see `quietly`), and the turns wait on it no more until it answers again."""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from frobozz._mailbox import Mailbox
from frobozz.engine import AssistantMessage, CompactBoundary, Event, Result, Session, Usage, UserMessage
from frobozz.engine.observers import HandoffLetter, HandoffRelay, HandoffStep, ask_to_hand_off, handoff_span
from frobozz.games import memory_queries
from frobozz.loop import ArchiveObserver, Provider, Section, Window, orientation, recalled_blocks
from frobozz.memory import (
    LoopSessionStore,
    MemoryService,
    MemorySettings,
    MemoryStore,
    MemoryStoreError,
    Recall,
    memory_line,
    quietly,
)

from ._orient import GameView, game_sections
from ._prompts import PAUSED

log = logging.getLogger("frobozz.runner")
T = TypeVar("T")
SERVERS = ("cortex", "handoff")
TOOLS = [f"mcp__{name}" for name in SERVERS]
RECALL_LIMIT = 3  # memories under one status line
LESSONS = 3
LESSONS_WAIT = 120.0  # seconds the model gets to answer the lessons question
COMPACT_WAIT = 600.0  # seconds a compaction may take
PAUSE = (
    f"{PAUSED} for a new context window (your letter is kept): end your turn now, without another "
    "game call; the game goes on right after"
)
TOOLS_NOTE = (
    "You also have long-term memory tools. cortex stores and searches notes that outlive this run: "
    "store what a later run of this game should know (what worked, what killed you, where things are), "
    "naming the room a note is about, and it comes back when you are there. handoff writes a letter "
    "to your next context window when I ask for one."
)
LESSONS_PROMPT = (
    "The run has ended: {how}. Write up to {n} lessons worth keeping for the next run of this game, "
    "one per line and nothing else: what worked, what to avoid, where things are."
)


def ask_with_command(used: int, window: int) -> str:
    return ask_to_hand_off(used, window) + " Then give your next command as usual."


def ask_mid_turn(used: int, window: int) -> str:
    return ask_to_hand_off(used, window) + " Then go on playing."


class MemoryWatch:
    """Fed every event in order by the run's observer (so it knows what a reply carried before the
    producer reads it): the hand-off relay, the memories the model stored, compactions, each turn's text."""

    def __init__(self, relay: HandoffRelay) -> None:
        self.relay = relay
        self.stored: list[str] = []  # stored with cortex since the last turn was recorded
        self.compacted = False  # a compaction since the last orientation
        self.compactions = 0
        self.results = 0
        self._result = anyio.Event()
        self.letter: str | None = None  # written (and accepted) since the last turn was recorded
        self.letter_waiting = False  # accepted, and the window not yet compacted with it
        self.wake = anyio.Event()  # set by whatever may call for a word mid-turn (tools mode)
        self._storing: dict[str, str] = {}
        self._writing: dict[str, str] = {}
        self._texts: list[str] = []
        self._send: MemoryObjectSendStream[str]
        self._send, self.said = anyio.create_memory_object_stream[str](math.inf)

    def on_event(self, event: Event) -> None:
        if event.is_replay:
            return
        self.relay.on_event(event)
        if isinstance(event, AssistantMessage) and not event.parent_tool_use_id:
            self._texts.append(event.text)
            for use in event.tool_uses:
                if use.name.endswith("cortex__store"):
                    self._storing[use.id] = str(use.input.get("content", ""))
                elif self.relay.is_handoff(use.name):
                    self._writing[use.id] = HandoffLetter.from_input(use.input).text()
        elif isinstance(event, UserMessage):
            for result in event.tool_results:
                content = self._storing.pop(result.tool_use_id, None)
                letter = self._writing.pop(result.tool_use_id, None)
                if result.is_error:
                    continue
                if content is not None and not _duplicate(result.content):
                    self.stored.append(content)
                if letter is not None:
                    self.letter, self.letter_waiting = letter, True  # the relay compacts with it once the turn ends
                    self._wake()
        elif isinstance(event, CompactBoundary):
            self.compacted, self.compactions = True, self.compactions + 1
            self._wake()
        elif isinstance(event, Usage):
            self._wake()  # the relay may find the window full
        elif isinstance(event, Result):
            said, self._texts = "\n".join(t for t in self._texts if t), []
            self._send.send_nowait(said)
            self.results += 1
            self._result.set()
            self._result = anyio.Event()

    def _wake(self) -> None:
        self.wake.set()
        self.wake = anyio.Event()

    async def caught_up(self, results: int) -> None:
        """Until this watch has seen `results` turns end (observers run a little behind the session)."""
        while self.results < results:
            await self._result.wait()


def _duplicate(content: Any) -> bool:
    """Whether cortex's answer to a store says the text was there already (then nothing new was stored)."""
    texts = (
        [content]
        if isinstance(content, str)
        else [b.get("text", "") for b in content if isinstance(b, dict)]
        if isinstance(content, list)
        else []
    )
    for text in texts:
        try:
            answer = json.loads(text)
        except (TypeError, ValueError):
            continue
        if isinstance(answer, dict) and answer.get("duplicate_of") is not None:
            return True
    return False


async def interrupt(session: Session) -> None:
    """End claude's turn, if one is under way."""
    with anyio.move_on_after(30):
        try:
            await session.interrupt()
        except Exception as e:  # noqa: BLE001 - it may simply have nothing to interrupt
            log.debug("nothing to interrupt: %s", e)


def _given(section: Section) -> Provider:
    """A section known already, as an orientation provider (the loop renders every section alike)."""

    async def provide(_: Window) -> Section:
        return section

    provide.__name__ = section.title
    return provide


@dataclass
class TurnNotes:
    """What memory did around one turn, for its record."""

    recalled: list[str]
    stored: list[str]
    compacted: bool
    handoff: str | None


class RunMemory:
    """`await RunMemory.open(settings, namespace=..., run_id=...)`; `session_id=` takes up a killed run's
    loop session (its seen-set and archive)."""

    def __init__(
        self,
        service: MemoryService,
        store: MemoryStore,
        sessions: LoopSessionStore,
        *,
        namespace: str,
        session_id: str,
        run_id: str,
        threshold: float,
        context_window: int | None,
        deadline: float = 1.5,
    ) -> None:
        self.service, self.store, self.sessions = service, store, sessions
        self.namespace, self.session_id, self.run_id, self.deadline = namespace, session_id, run_id, deadline
        self.watch = MemoryWatch(HandoffRelay(threshold=threshold, context_window=context_window, ask=ask_with_command))
        self.archive: ArchiveObserver | None = None
        self.letter: str | None = None  # this run's latest hand-off letter
        self._recall = Recall(
            store, sessions, limit=RECALL_LIMIT, deadline=deadline, context=False
        )  # a game's notes stand alone
        self._recalled: list[str] = []
        self.claude: Session | None = None  # the run's session, once made: whose claude handoff's letters are from
        self.mailbox: Mailbox | None = None  # tools mode: notes for the game server's next answer
        self.pausing = False  # tools mode: the turn is being ended to compact with a letter
        self.idle = False  # tools mode: claude's turn has ended and the producer is answering it
        self._ask = ""
        self._compactions = 0

    @classmethod
    async def open(
        cls,
        settings: MemorySettings,
        *,
        namespace: str,
        run_id: str,
        session_id: str | None = None,
        threshold: float = 0.75,
        context_window: int | None = None,
        deadline: float = 1.5,
    ) -> RunMemory:
        service = MemoryService(settings)
        try:
            store, sessions = await service.store(), await service.sessions()
            record = await sessions.open(
                store.namespace(namespace), client=f"frobozz play {run_id}", session_id=session_id
            )
        except BaseException:
            await service.aclose()
            raise
        self = cls(
            service,
            store,
            sessions,
            namespace=record.namespace,
            session_id=record.id,
            run_id=run_id,
            threshold=threshold,
            context_window=context_window,
            deadline=deadline,
        )
        try:  # the embedding model loads now, not in the first orientation's time
            await store.embedder.embed(["warming up"])
        except Exception as e:  # noqa: BLE001 - recall and orientation say so on their own
            log.warning("memory: the embedding model did not load: %s", e)
        turns = await sessions.transcript(record.id)
        self.archive = ArchiveObserver(
            sessions, record.id, turn=max((e.turn for e in turns), default=0) + 1, guard=self.quietly
        )  # (unguarded, a write on a database that hangs held every later event, and each turn's archive_user)
        return self

    async def aclose(self) -> None:
        await self.service.aclose()

    def stdio_servers(self, env: dict[str, str]) -> dict[str, Any]:
        """cortex and handoff for claude's --mcp-config, as two processes claude starts, storing in this run's
        namespace by default, what they store marked seen in its loop session. Served in the run's process
        instead (`serve_in_process`), each takes the same settings from this environment."""
        env = {
            **env,
            "FROBOZZ_CORTEX_DEFAULT_NAMESPACE": self.namespace,
            "FROBOZZ_CORTEX_SEEN_SESSION": self.session_id,
        }  # recall does not hand the model its own notes
        return {
            name: {"command": sys.executable, "args": ["-m", "frobozz", "serve", name], "env": env} for name in SERVERS
        }

    def claude_session(self) -> str | None:
        """The id of the claude session the run's session serves now (a restarted claude has a new one)."""
        return self.claude.session_id if self.claude is not None else None

    def game_server_env(self, mailbox: Mailbox) -> dict[str, str]:
        """Tools mode: the game server recalls after each act, in this run's namespace and seen-set, and
        passes on what the runner leaves in `mailbox` mid-turn."""
        self.mailbox = mailbox
        mailbox.resume()  # a run killed while paused is not paused any more
        mailbox.take()  # nor are its stale notes still due
        mailbox.forget_moves()  # the moves this run's game server makes are counted from 0
        return {
            "FROBOZZ_GAME_RECALL_NAMESPACE": self.namespace,
            "FROBOZZ_GAME_RECALL_SESSION": self.session_id,
            "FROBOZZ_GAME_MAILBOX": str(mailbox.folder),
        }

    async def quietly(self, part: str, work: Awaitable[T], default: T, *, within: float | None = None) -> T:
        """Memory's `quietly` on the run's service: `work` is not started while memory is off."""
        within = self.deadline + 0.5 if within is None else within
        return await quietly(part, work, default, within=within, service=self.service)

    # -- before a message ---------------------------------------------------------------------------
    async def message(
        self, header: str, text: str, location: str | None, view: Callable[[], Awaitable[GameView]]
    ) -> str:
        """The next game message: after a compaction, the orientation (it carries the status and the
        game's answer); else the status line, what memory recalls for this room, and the answer; with
        the ask to hand off when the window is full."""
        if self.watch.compacted:
            return await self.orientation(await view())
        recalled = await self.recall(location, text)
        ask = self.take_ask()
        message = f"{header}\n{recalled}\n\n{text}" if recalled else f"{header}\n\n{text}"
        return f"{message}\n\n({ask})" if ask else message

    async def orientation(self, view: GameView) -> str:
        """The first message of a context window: the game's sections, notes from earlier runs, this
        run's latest hand-off letter."""
        self.watch.compacted = False
        topic = f"{view.location or ''}\n{view.text}"

        async def notes(window: Window) -> Section | None:
            if not window.database:  # memory is off: the database does not answer
                return None
            lessons = await self.store.recent(LESSONS * 2, self.namespace, metadata={"kind": "lesson"})
            relevant = (
                [
                    h.memory
                    for h in await self.store.search(
                        topic,
                        limit=RECALL_LIMIT,
                        namespace=self.namespace,
                        min_score=self._recall.min_score,
                        context=False,
                    )
                ]
                if topic.strip()
                else []
            )  # tools mode, before the game has begun
            shown = {m.id: m for m in [*relevant, *lessons]}
            if not shown:
                return None
            await self.sessions.mark_seen(self.session_id, list(shown))  # recall does not repeat them
            self._recalled += [f"[memory {m.id}] {m.content}" for m in shown.values()]  # in the turn's record
            return Section("Notes from earlier runs", "\n".join(memory_line(m) for m in shown.values()))

        letter = [Section("This run's latest hand-off letter", self.letter)] if self.letter else []
        window = Window(
            self.namespace, self.session_id, previous_start=None, topic=topic, database=self.service.answering
        )
        return await orientation(
            [*map(_given, game_sections(view)), notes, *map(_given, letter)], window, deadline=self.deadline
        )

    async def recall(self, location: str | None, text: str) -> str:
        """The memories for this room and text not shown before in this run, as a block, or ''."""
        queries = memory_queries(location, text) or [""]
        hits = await self.quietly(
            "recall", self._recall(self.session_id, self.namespace, queries[0], extra=queries[1:]), []
        )
        self._recalled += [f"[memory {h.memory.id}] {h.memory.content}" for h in hits]
        blocks = recalled_blocks(hits)
        return blocks[0]["text"] if blocks else ""

    def recalled_by_game(self, lines: list[str]) -> None:
        """Tools mode: what the game server recalled with an act's answer, for the turn's record."""
        self._recalled += [line.removeprefix("- ") for line in lines if isinstance(line, str)]

    async def archive_user(self, text: str) -> None:
        if self.archive is not None:
            await self.quietly("archiving the message", self.archive.archive_user(text), None, within=10)

    # -- between turns --------------------------------------------------------------------------------
    async def between_turns(self, session: Session, turn_end: Callable[[], Awaitable[object]]) -> None:
        """Take the relay's steps: after a turn in which the model wrote a letter, compact with it and
        wait for the compaction's turn to end (the next message is then the orientation); past the
        threshold, the ask goes with the next message."""
        letters: list[HandoffStep] = []
        turn = session.engine.trace.prepare_turn()  # the turn the compaction (or the ask) goes with
        for step in self.watch.relay.steps():
            if step.letter is not None:
                letters.append(step)
            else:
                with handoff_span(step, turn):
                    self._ask = self.watch.relay.messages(step)[0]
        if letters:
            step = letters[-1]
            assert step.letter is not None
            self.letter = step.letter.text()
            self._ask, self.watch.letter_waiting = "", False
            with handoff_span(step, turn):
                await session.send(self.watch.relay.compact(step.letter))
            with anyio.move_on_after(COMPACT_WAIT):
                await turn_end()
                await self.watch.caught_up(session.turns_completed)  # it has seen the compaction too
        if self.mailbox is not None:
            self.pausing = False
            self.mailbox.resume()

    async def between_moves(
        self,
        session: Session,
        view: Callable[[], Awaitable[GameView]],
        settled: Callable[[], Awaitable[None]],
        answered: Callable[[], int],
    ) -> None:
        """Tools mode, for the whole run: a turn is many game calls, so what cannot wait for its end goes
        with the next game answer (through the mailbox): the orientation after claude compacted on its
        own, the ask to hand off once the window is full. Once a letter is accepted, moves pause and the
        turn is interrupted (after the game calls under way have answered), so that between_turns can
        compact with it."""
        watch, mailbox = self.watch, self.mailbox
        assert mailbox is not None
        while True:
            wake = watch.wake
            if self.idle:  # the producer answers the turn's end itself
                await wake.wait()
                continue
            if watch.compacted:  # claude compacted on its own, mid-turn
                mailbox.post(await self.orientation(await view()))
            step = watch.relay.due()
            if step is not None:
                with handoff_span(step, session.engine.trace.context()):  # in the turn under way
                    mailbox.post(ask_mid_turn(step.used, step.window))
            if watch.letter_waiting and not self.pausing:
                self.pausing = True
                mailbox.pause(PAUSE)
                with anyio.move_on_after(LESSONS_WAIT / 4) as waited:
                    # every move the game made has reached claude: an interrupt would stop its call mid-way,
                    # and the record would miss it
                    await mailbox.answered(answered)
                    await settled()
                if waited.cancelled_caught:
                    log.warning("memory: a game call was still unanswered after %.0f s; interrupting", LESSONS_WAIT / 4)
                await interrupt(session)
            await wake.wait()

    def take_ask(self) -> str:
        """The relay's ask to hand off, if there is one for the next message."""
        ask, self._ask = self._ask, ""
        return ask

    def notes(self) -> TurnNotes:
        """What memory did since the last turn was recorded (and forget it)."""
        watch = self.watch
        notes = TurnNotes(self._recalled, watch.stored, watch.compactions > self._compactions, watch.letter)
        self._recalled, watch.stored, watch.letter = [], [], None
        self._compactions = self.watch.compactions
        return notes

    # -- at the end -----------------------------------------------------------------------------------
    async def lessons(self, session: Session, *, how: str, score: int | None, turn: int) -> list[str]:
        """Ask the model once for lessons (after any turn still running) and keep them for the next run."""
        with anyio.move_on_after(LESSONS_WAIT / 4):
            await interrupt(session)  # claude may be mid-turn (a time limit; tools mode)
            await session.wait_idle()
            await self.watch.caught_up(session.turns_completed)
        while True:  # what the model said before this question is not its answer
            try:
                self.watch.said.receive_nowait()
            except anyio.WouldBlock:
                break
        await session.send(LESSONS_PROMPT.format(how=how, n=LESSONS))
        with anyio.move_on_after(LESSONS_WAIT):
            answer = await self.watch.said.receive()
            lines = [line.strip(" -*\t") for line in answer.splitlines() if line.strip(" -*\t")][:LESSONS]
            metadata = {"kind": "lesson", "run_id": self.run_id, "score": score, "turn": turn}
            return [line for line in lines if await self.keep(line, metadata)]
        log.warning("memory: the model did not answer the lessons question in time")
        return []

    async def keep(self, content: str, metadata: dict[str, Any]) -> bool:
        """Store one note in the run's namespace; False (with a log line) when it cannot be."""
        try:
            _, duplicate = await self.store.store(content, metadata, self.namespace, source="frobozz play")
        except MemoryStoreError as e:
            log.warning("memory: %r was not kept (%s)", content[:60], e)
            return False
        if duplicate is not None:
            log.info("memory: %r was kept already (memory %d)", content[:60], duplicate)
        return duplicate is None
