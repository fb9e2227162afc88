"""The play loop's two ends. Text mode: the game producer turns game output into user messages,
and the reply collector hands each finished reply back to it. Tools mode: claude plays through
the game server itself, and the tool watcher records what the game answered.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from frobozz import _spans
from frobozz.engine import (
    AssistantMessage,
    EngineError,
    ErrorEvent,
    Event,
    Restarted,
    Result,
    Session,
    TextBlock,
    UserMessage,
    parse_blocks,
    text_of,
)
from frobozz.games import CommandError, GameError, GameSession, Turn

from ._context import RunContext
from ._extract import extract_commands
from ._orient import GameView
from ._prompts import PAUSED, correction, game_message, status_header
from ._run_memory import RunMemory


@dataclass(frozen=True)
class Reply:
    text: str
    is_error: bool = False
    error: str = ""


class ReplyCollector:
    """Observer: gathers claude's text for a turn and, when the turn ends, passes the reply on."""

    name = "replies"

    def __init__(self, context: RunContext, memory: RunMemory | None = None) -> None:
        self.context = context
        self.memory = memory
        self._texts: list[str] = []
        self._send: MemoryObjectSendStream[Reply]
        self._send, self.replies = anyio.create_memory_object_stream[Reply](math.inf)

    def on_event(self, event: Event) -> None:
        if event.is_replay:
            return
        if self.memory is not None:  # first: memory knows what the reply carried before the producer reads it
            self.memory.watch.on_event(event)
        if isinstance(event, AssistantMessage) and not event.parent_tool_use_id:
            self._texts.append(event.text)
        elif isinstance(event, Restarted) and event.resumed:  # claude crashed: it restored an older total
            self.context.claude_restarted()
        elif isinstance(event, Result):
            self.context.add_cost(event)
            text, self._texts = "\n".join(t for t in self._texts if t), []
            self._send.send_nowait(Reply(text, event.is_error, event.result or event.subtype))
        elif isinstance(event, ErrorEvent) and event.source == "process":
            self._send.send_nowait(Reply("", True, event.message))


class GameProducer:
    """Producer: the game's answers as user messages, each with a status header; runs the commands."""

    name = "game"

    def __init__(
        self,
        game: GameSession,
        context: RunContext,
        replies: MemoryObjectReceiveStream[Reply],
        *,
        first_message: str,
        multi: bool,
        memory: RunMemory | None = None,
        instructions: str = "",
        note: str = "",
    ) -> None:
        self.game = game
        self.context = context
        self.replies = replies
        self.first_message = first_message
        self.multi = multi
        self.memory = memory
        self.instructions = instructions
        self.note = note  # before the game's text in the first message (a resumed run says so)

    def header(self) -> str:
        info = self.context.info
        return status_header(info.title, self.game.current, self.game.max_score, info.turns, info.max_turns)

    async def view(self, text: str) -> GameView:
        """What the orientation shows of the game; the inventory is peeked (it costs no move)."""
        try:
            inventory: str | None = (await self.game.peek("inventory")).text
        except GameError:
            inventory = None
        opening = self.game.turns[0] if self.game.turns[0].number == 0 else None
        return GameView(
            self.instructions,
            self.header(),
            text,
            self.game.current.location,
            inventory,
            tuple(self.context.records),
            opening,
        )

    async def send(self, session: Session, message: str) -> None:
        if self.memory is not None:
            await self.memory.archive_user(message)
        await session.send(message)

    async def run(self, session: Session) -> None:
        context = self.context
        first, started = self.first_message, time.perf_counter()
        if self.memory is not None:
            first = await self.memory.orientation(await self.view(self.note + self.game.current.text))
        await self.send(session, first)
        context.own_turn(time.perf_counter() - started)
        async for reply in self.replies:
            started = time.perf_counter()
            if reply.is_error:
                context.finish(f"claude failed: {reply.error[:300]}", status="failed")
                return
            commands = extract_commands(reply.text, multi=self.multi)
            if not commands:
                context.info.corrections += 1
                if context.info.corrections > context.correction_limit:
                    context.finish("no command in replies")
                    return
                await self.send(session, correction(self.header(), "I could not find a command in that."))
                continue
            answers = []
            trace = session.engine.trace
            next_turn = trace.prepare_turn()  # the game's answer and what memory adds are the next turn's
            for command in commands:
                if context.finished.is_set():  # ended meanwhile (time, cost, a stop): none of the rest is played
                    return
                try:
                    with _spans.span(_spans.GAME_ACT, parent=next_turn) as span:
                        turn = await self.game.act(command)
                        if span.is_recording():
                            span.set_attributes(
                                {
                                    _spans.GAME_SCORE: turn.score or 0,
                                    _spans.GAME_MOVES: turn.moves or 0,
                                    **({_spans.GAME_COMMAND: command} if trace.content is not None else {}),
                                }
                            )
                except CommandError as e:  # a refused meta-command: tell the player, play on
                    answers.append(f"[{e}]")
                    continue
                except GameError as e:
                    answers.append(f"[{e}]")
                    continue
                context.commit(
                    command,
                    turn,
                    reply=reply.text,
                    snapshot=self.game.snapshot(),
                    notes=self.memory.notes() if self.memory else None,
                )
                await context.committed()
                answers.append(turn.text if len(commands) == 1 else f"> {command}\n{turn.text}")
                reason = context.stop_reason(turn)
                if reason:
                    context.finish(reason)
                    return
            text = "\n\n".join(answers)
            if self.memory is None:
                message = game_message(self.header(), text)
            else:
                paused = time.perf_counter()
                await self.memory.between_turns(session, self.replies.receive)  # the model's time: not counted
                started += time.perf_counter() - paused
                message = await self.memory.message(
                    self.header(), text, self.game.current.location, partial(self.view, text)
                )
            await self.send(session, message)
            context.own_turn(time.perf_counter() - started)


# Rounds of game calls (one model message's) in a row in which every call failed, before the run gives up: a failed
# call is not a turn, so neither the turn limit nor the corrections would stop a player that keeps calling a game
# that is gone, only the time limit. Counted by round, not call: claude makes every call of a message before the
# model reads any result, so ten calls in one message are one mistake
FAILING_ROUNDS_LIMIT = 10


class ToolWatcher:
    """Observer (tools mode): pairs claude's game tool calls with their results and records each act."""

    name = "game-tools"

    def __init__(self, context: RunContext, title: str, memory: RunMemory | None = None) -> None:
        self.context = context
        self.title = title
        self.memory = memory
        self._calls: dict[str, tuple[str, str | None, str]] = {}  # call id -> tool, command, the message making it
        self._texts: list[str] = []
        self._settled = anyio.Event()  # no game call is waiting for its answer
        self.session_id: str | None = None  # the game's, as the game server named it
        self.failing_rounds = 0  # rounds of game calls in a row in which every one failed
        self.moves_answered = 0  # act, undo and restore calls answered without an error: moves the game made
        self._counted: str | None = None  # the round last counted (a failure) or cleared (a call that worked)
        self._read: set[str] = set()  # the game calls whose answers this observer has taken in
        self._answer = anyio.Event()  # set (and made anew) as each answer has been taken in
        self._send: MemoryObjectSendStream[Result]
        self._send, self.turn_ends = anyio.create_memory_object_stream[Result](math.inf)

    async def settled(self) -> None:
        """Until every game call claude has made so far has its answer."""
        while self._calls:
            await self._settled.wait()

    async def took_in(self, call_id: str) -> None:
        """Until this call's answer has been taken in (what it played is recorded, and the run ended if that
        ended it), or the run has ended: claude makes a message's game calls one after another, and asks
        about the next before this observer has read the last one's answer from the router."""
        while call_id not in self._read and not self.context.finished.is_set():
            async with anyio.create_task_group() as woken:  # by the next answer, or the run's end from outside

                async def wake(on: anyio.Event) -> None:
                    await on.wait()
                    woken.cancel_scope.cancel()

                woken.start_soon(wake, self._answer)
                woken.start_soon(wake, self.context.finished)
        self._read.discard(call_id)

    def on_event(self, event: Event) -> None:
        try:
            self._take(event)
        finally:  # (also when the event was not recorded: the run had ended, or the commit failed)
            if isinstance(event, UserMessage) and event.tool_results:
                self._took_in(result.tool_use_id for result in event.tool_results)

    def _took_in(self, call_ids: Iterable[str]) -> None:
        self._read.update(call_ids)
        self._answer.set()
        self._answer = anyio.Event()

    def _take(self, event: Event) -> None:
        if event.is_replay:
            return
        if self.memory is not None:  # first, as in text mode; also after the end (the lessons' answer)
            self.memory.watch.on_event(event)
        if self.context.finished.is_set():
            return
        if isinstance(event, AssistantMessage):
            self._texts.append(event.text)
            for use in event.tool_uses:
                tool = use.name.rsplit("__", 1)[-1]
                if use.name.startswith("mcp__game__"):
                    command = str(use.input.get("command", "")) if tool == "act" else None
                    self._calls[use.id] = (tool, command, event.message_id or use.id)
                    self._settled = anyio.Event() if self._settled.is_set() else self._settled
        elif isinstance(event, UserMessage):
            for result in event.tool_results:
                tool, command, round_ = self._calls.pop(result.tool_use_id, ("", None, ""))
                if tool and not result.is_error:
                    self._count(round_, None)
                elif tool and PAUSED not in (text := text_of(result.content)):  # a refusal is no call made
                    self._count(round_, text)
                state = _state(result.content)
                if result.is_error or state is None or tool not in ("act", "new_game", "restore", "undo"):
                    continue
                self.moves_answered += tool != "new_game"
                self.session_id = state.get("session_id") or self.session_id
                self.context.info.game_session = self.session_id  # a queued run's game, shared: taken up by id
                if self.memory is not None and tool == "act":
                    self.memory.recalled_by_game(state.get("recalled") or [])
                turn = Turn(
                    number=self.context.turn_number,
                    command=command,
                    text=state.get("text", ""),
                    score=state.get("score"),
                    moves=state.get("moves"),
                    location=state.get("location"),
                    done=bool(state.get("done")),
                    won=bool(state.get("won")),
                )
                if tool != "act":
                    if tool == "new_game" and not self.context.records and self.context.info.start_location is None:
                        self.context.info.start_location = turn.location  # the map's first room
                    self.context.current = turn
                    continue
                reply, self._texts = "\n".join(t for t in self._texts if t), []
                self.context.commit(
                    command or "", turn, reply=reply, snapshot=None, notes=self.memory.notes() if self.memory else None
                )
                reason = self.context.stop_reason(turn)
                if reason:
                    self.context.finish(reason)
            if not self._calls:
                self._settled.set()
        elif isinstance(event, Restarted) and event.resumed:  # claude crashed: it restored an older total
            self.context.claude_restarted()
        elif isinstance(event, Result):
            self._unanswered()  # a call the turn ended without answering will not be answered
            self.context.add_cost(event)
            self._send.send_nowait(event)
        elif isinstance(event, ErrorEvent) and event.source == "process":  # claude is gone, not restarted:
            self._unanswered()  # no turn will end, and no call be answered (as in text mode: the run fails)
            self.context.finish(f"claude failed: {event.message[:300]}", status="failed")

    def _unanswered(self) -> None:
        """The calls under way will not be answered: nothing waits for them any more."""
        self._took_in(self._calls)
        self._calls.clear()
        self._settled.set()

    def _count(self, round_: str, failure: str | None) -> None:
        """A game call's outcome: one that worked clears its round; a round's first failure counts it."""
        if failure is None:
            self.failing_rounds, self._counted = 0, round_
        elif round_ != self._counted:
            self.failing_rounds, self._counted = self.failing_rounds + 1, round_
            if self.failing_rounds >= FAILING_ROUNDS_LIMIT:
                self.context.finish(
                    f"the game tools failed {self.failing_rounds} times in a row; the last: {failure}"[:300],
                    status="failed",
                )


class ToolsProducer:
    """Producer (tools mode): the instructions, then a nudge whenever claude stops before the game does."""

    name = "game-instructions"

    def __init__(
        self,
        context: RunContext,
        watcher: ToolWatcher,
        *,
        first_message: str,
        max_score: int | None,
        memory: RunMemory | None = None,
        instructions: str = "",
        inventory: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.context = context
        self.watcher = watcher
        self.first_message = first_message
        self.max_score = max_score
        self.memory = memory
        self.instructions = instructions
        self.inventory = inventory  # read from the game server's autosave, when there is one

    def header(self) -> str:
        current = self.context.current
        return (
            status_header(
                self.watcher.title, current, self.max_score, self.context.turn_number, self.context.info.max_turns
            )
            if current
            else ""
        )

    async def view(self) -> GameView:
        current = self.context.current
        inventory = await self.inventory() if self.inventory and current else None
        return GameView(
            self.instructions,
            self.header() or "[the game has not started: call new_game]",
            current.text if current else "",
            current.location if current else None,
            inventory,
            tuple(self.context.records),
            session_id=self.watcher.session_id,
        )

    async def run(self, session: Session) -> None:
        try:  # a first turn that starts before the game server is up has no game tools
            await session.wait_for_mcp({"game", *(["cortex", "handoff"] if self.memory else [])})
        except EngineError as e:
            self.context.finish(f"the game server did not start: {e}", status="failed")
            return
        first = self.first_message
        if self.memory is None:
            await session.send(first)
            await self._play(session)
            return
        first = f"{await self.memory.orientation(await self.view())}\n\n{self.first_message}"
        await session.send(first)
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                self.memory.between_moves, session, self.view, self.watcher.settled, lambda: self.watcher.moves_answered
            )
            await self._play(session)
            tg.cancel_scope.cancel()

    async def _play(self, session: Session) -> None:
        """Each time claude ends its turn before the game ends: nudge it on (with memory: after the hand-off's
        compaction, with the orientation; with what the mailbox still holds)."""
        memory = self.memory
        async for result in self.watcher.turn_ends:
            if self.context.finished.is_set():
                return
            paused = memory is not None and memory.pausing  # we ended the turn, to compact with the letter
            if result.is_error and not paused:
                self.context.finish(f"claude failed: {(result.result or result.subtype)[:300]}", status="failed")
                return
            if not paused:
                self.context.info.corrections += 1
                if self.context.info.corrections > self.context.correction_limit:
                    self.context.finish("stopped playing")
                    return
            nudge = "The game is not over: keep playing with the act tool."
            if memory is None:
                await session.send(f"{self.header()}\n\n{nudge}")
                continue
            memory.idle = True
            try:
                await self._answer(session, memory, nudge)
            finally:
                memory.idle = False

    async def _answer(self, session: Session, memory: RunMemory, nudge: str) -> None:
        """The message after a turn ended, with memory: the hand-off's compaction first, if one is due; the
        orientation if the window is new, else the status; the notes the game had no answer to carry."""
        await memory.between_turns(session, self.watcher.turn_ends.receive)
        undelivered = memory.mailbox.take() if memory.mailbox else []
        if memory.watch.compacted:
            undelivered = [n for n in undelivered if not n.startswith("# Orientation")]  # a newer one follows
            opening = await memory.orientation(await self.view())
        else:
            ask = memory.take_ask()
            opening = self.header() + (f"\n\n({ask})" if ask else "")
        await session.send("\n\n".join([opening, *undelivered, nudge]))


def _state(content: Any) -> dict[str, Any] | None:
    """The game state a game tool returned (its structured JSON, carried as text)."""
    for block in parse_blocks(content):
        if not isinstance(block, TextBlock):
            continue
        try:
            value = json.loads(block.text)
        except ValueError:
            continue
        if isinstance(value, dict) and "text" in value and "score" in value:
            return value
    return None
