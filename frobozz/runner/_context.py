"""What one run knows while it plays: its store, budgets and stop rules, and who to tell of a turn."""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from frobozz.engine import Engine, Result, TurnCost
from frobozz.games import Turn
from frobozz.memory import DATABASE_ERRORS

from ._report import append_turn
from ._run_memory import TurnNotes
from ._store import RunStore, TurnRecord

if TYPE_CHECKING:
    from ._ledger import RunLedger

log = logging.getLogger("frobozz.runner")
NOT_RECORDED = "a turn could not be recorded"  # a run so stopped is resumed as an interrupted one is


class TurnNotRecordedError(RuntimeError):
    """A worker's run stopped on a turn it could not record (its disk): an error of this worker's, tried again."""


DATABASE_GONE = "the database went away"  # a queued run's reason when it stopped for want of its database
_DIED = re.compile(r"\*+\s*You have died\s*\*+", re.IGNORECASE)


class RunContext:
    def __init__(
        self,
        store: RunStore,
        *,
        max_score: int | None,
        correction_limit: int = 5,
        on_turn: Callable[[RunContext, TurnRecord], None] | None = None,
        priced: bool = True,
        script_turns: int | None = None,
        ledger: RunLedger | None = None,
        ledger_required: bool = True,
    ) -> None:
        self.store = store
        self.ledger = ledger  # each turn is committed to the database too, in order
        self.ledger_required = ledger_required  # a queued run stops without its database; one played here goes on
        self._to_ledger, self._ledger_queue = anyio.create_memory_object_stream[
            tuple[TurnRecord, dict[str, Any] | None]
        ](math.inf)
        self._pending = 0
        self._written = anyio.Condition()
        self.priced = priced  # False: a scripted model, which costs nothing (claude prices it as a paid one)
        self.script_turns = script_turns  # a walkthrough's or script's commands: the run ends once all are played
        self.info = store.info
        self.max_score = max_score
        self.correction_limit = correction_limit
        self.on_turn = on_turn
        self.records: list[TurnRecord] = []
        self.current: Turn | None = None
        self.finished = anyio.Event()
        self.started = time.monotonic()
        self.own_seconds = 0.0  # the runner's own time between a reply and the next message (no model)
        self.own_turns: list[float] = []  # the same, turn by turn (seconds)
        self._costs = TurnCost()  # claude's running totals, per claude session, turned into each turn's cost
        self._engine: Engine | None = None  # the run's claude, once started

    @property
    def turn_number(self) -> int:
        return self.info.turns

    def own_turn(self, seconds: float) -> None:
        self.own_seconds += seconds
        self.own_turns.append(seconds)

    def budget_left(self) -> bool:
        return self.info.max_turns is None or self.info.turns < self.info.max_turns

    def claude_started(self, engine: Engine) -> None:
        """The run's claude is started: when it resumed the run's claude session, its turns cost what its running
        total grows by from the total it restored (after a kill -9, an older one than the run has spent, or none).
        Before any of its turns is added."""
        self._engine = engine
        self._costs.resumed_by(engine)

    def claude_restarted(self) -> None:
        """claude crashed and was started again on its session (a `Restarted` event that resumed, in the order of
        the events): it carries on from the total it restores, as at a resume. Before that claude's turns."""
        if self._engine is not None:
            self._costs.resumed_by(self._engine)

    def add_cost(self, result: Result) -> None:
        """The turn this Result ends, added to the run's cost (and the run stopped at its cost budget)."""
        turn = self._costs.of(result)
        if turn is None or not self.priced:
            return
        self.info.cost_usd = round(self.info.cost_usd + turn, 6)
        if self.info.max_cost is not None and self.info.cost_usd >= self.info.max_cost:
            self.finish("max cost")

    def commit(
        self, command: str, turn: Turn, *, reply: str, snapshot: dict | None, notes: TurnNotes | None = None
    ) -> TurnRecord:
        """Record one played command before anything else happens (with what memory did around it);
        return its record."""
        noted = {} if notes is None else asdict(notes)  # its fields are the record's
        record = TurnRecord(
            turn=self.info.turns + 1,
            command=command,
            text=turn.text,
            score=turn.score,
            moves=turn.moves,
            location=turn.location,
            done=turn.done,
            won=turn.won,
            reply=reply,
            cost_usd=self.info.cost_usd,
            **noted,
        )
        try:
            self.store.record(record, snapshot)
        except OSError as e:  # (a disk that is full): what was played is kept, this turn was not; resumable
            self.finish(f"{NOT_RECORDED}: turn {record.turn} ({e})"[:300], status="stopped")
            raise
        if self.ledger is not None:
            self._pending += 1
            self._to_ledger.send_nowait((record, snapshot))
        append_turn(self.store, record)
        self.records.append(record)
        self.current = turn
        self._take(record)  # run.json is rewritten at the end: turns.jsonl is the record of each turn
        if self.on_turn:
            self.on_turn(self, record)
        return record

    async def keep_ledger(self) -> None:
        """Commit the turns to the database in the order they were played (a task beside the run: the
        observers that commit tools-mode turns cannot wait on the database)."""
        assert self.ledger is not None
        async for record, snapshot in self._ledger_queue:
            try:
                await self.ledger.record(self.info, record, snapshot)
            except DATABASE_ERRORS as e:
                self.ledger = None
                if self.ledger_required:  # the run stops where the database last has it (its directory: all)
                    self.finish(f"{DATABASE_GONE}: {e}"[:300], status="stopped")
                else:
                    log.warning(
                        "the database went away (%s): run %s goes on, recorded in its directory only",
                        e,
                        self.info.run_id,
                    )
            async with self._written:
                self._pending = 0 if self.ledger is None else self._pending - 1
                self._written.notify_all()
            if self.ledger is None:
                return

    async def committed(self) -> None:
        """Until every turn played so far is in the database too (text mode waits before the next turn)."""
        async with self._written:
            while self._pending:
                await self._written.wait()

    def stop_reason(self, turn: Turn) -> str | None:
        if turn.won:
            return "won"
        if _DIED.search(turn.text):
            return "died"
        if turn.done:
            return "game over"
        if not self.budget_left():
            return "max turns"
        if self.script_turns is not None and self.info.turns >= self.script_turns:
            return "script ended"
        return None

    def finish(self, reason: str, status: str = "finished") -> None:
        """The run ends, for `reason`. Ended even when run.json cannot be written (a disk that is full: it says the
        run is running, as a killed one's does, and is resumed as one): a run whose end was not written waited for
        ever."""
        if not self.finished.is_set():
            self.info.reason, self.info.status = reason, status
            self.info.ended = datetime.now(UTC).isoformat(timespec="seconds")
            try:
                self.store.save_info()
            finally:
                self.finished.set()

    def _take(self, record: TurnRecord) -> None:
        info = self.info
        info.turns, info.score, info.moves, info.won, info.done = (
            record.turn,
            record.score,
            record.moves,
            record.won,
            record.done,
        )
        info.memories_recalled += len(record.recalled)
        info.memories_stored += len(record.stored)
        info.compactions += record.compacted
        info.handoffs += record.handoff is not None

    def resume_from(self, records: list[TurnRecord]) -> None:
        self.records = list(records)
        self.info.turns = len(records)
        info = self.info
        info.memories_recalled = info.compactions = info.handoffs = 0
        info.memories_stored = info.lessons  # kept at the end of an earlier stretch of the run
        for record in records:
            self._take(record)
        last = records[-1] if records else None
        if last:
            self.info.cost_usd = max(self.info.cost_usd, last.cost_usd)
            self.current = Turn(
                number=last.turn,
                command=last.command,
                text=last.text,
                score=last.score,
                moves=last.moves,
                location=last.location,
                done=last.done,
                won=last.won,
            )

    def current_or(self, opening: Turn) -> Turn:
        return self.current or replace(opening)
