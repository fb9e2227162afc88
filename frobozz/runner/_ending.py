"""How a run ends: it plays until it finishes (its own stop rules, in RunContext: won, died, a budget spent),
its time runs out, a signal comes or its caller says stop, and the turns it played are in the database before
it ends; then, with memory, it keeps its lessons for the next run, and its end is written: the summary,
charts and map in its directory, its row in the database."""

from __future__ import annotations

import logging
import signal
from datetime import UTC, datetime
from functools import partial

import anyio
from anyio.abc import TaskStatus

from frobozz.engine import Session
from frobozz.memory import DATABASE_ERRORS

from . import _report
from ._context import RunContext
from ._run_memory import RunMemory

log = logging.getLogger("frobozz.runner")


async def until_finished(context: RunContext, *, stop: anyio.Event | None, keep_ledger: bool) -> None:
    """Until the run finishes, or its time limit or `stop` (set before: at once, before its first turn) ends it;
    then until its turns are committed to the database (`keep_ledger`: a task commits them as they come),
    a minute at most."""
    info = context.info
    async with anyio.create_task_group() as tg:
        if stop is not None:
            tg.start_soon(_stop_on_event, context, stop)
        if keep_ledger:
            tg.start_soon(context.keep_ledger)
        with anyio.move_on_after(info.max_seconds or float("inf")) as timer:
            await context.finished.wait()
        if timer.cancelled_caught:
            context.finish("time limit")
        with anyio.move_on_after(60):
            await context.committed()  # the turns played are in the database before the run ends
        tg.cancel_scope.cancel()


async def _stop_on_event(context: RunContext, stop: anyio.Event) -> None:
    await stop.wait()
    context.finish("interrupted", status="stopped")


async def on_signals(
    interrupted: anyio.Event, scope: anyio.CancelScope, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """SIGINT or SIGTERM sets `interrupted` (the run stops at its next turn boundary, or before its first: as
    `stop` stops it); a second cancels `scope`, to stop at once. Listening once this has started."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            if interrupted.is_set():
                scope.cancel()
                return
            interrupted.set()


async def keep_lessons(memory: RunMemory, session: Session, context: RunContext) -> None:
    """At the end of a run (win, death, limits): the model's lessons, and where and how a death came."""
    info = context.info
    last = context.records[-1] if context.records else None
    how = f"{info.reason}, score {info.score}/{context.max_score} after {info.turns} turns"
    kept = await memory.lessons(session, how=how, score=info.score, turn=info.turns)
    if info.reason == "died" and last is not None:
        death = (
            f"{info.title}: died at {last.location} on turn {last.turn} after '{last.command}': "
            f"{' '.join(last.text.split())[:300]}"
        )
        if await memory.keep(
            death,
            {
                "kind": "lesson",
                "death": True,
                "run_id": info.run_id,
                "score": info.score,
                "turn": last.turn,
                "location": last.location,
            },
        ):
            kept.append(death)
    info.lessons += len(kept)
    info.memories_stored += len(kept)
    context.store.save_info()  # run.json (and so the web) counts them as the summary does
    _report.append_kept(context.store, kept)


async def write_up(context: RunContext, *, queued: bool) -> None:
    """The run's end, written: its summary, charts and map in its directory, and its row in the database (a
    queued run, which the database holds, fails without it; one played here goes without, with a warning)."""
    info = context.info
    await anyio.to_thread.run_sync(  # (once it runs, the drawing is finished even if the run is cancelled)
        partial(_report.finish, context.store, list(context.records), context.max_score, start=info.start_location)
    )
    if context.ledger is not None:  # (None after the database went away mid-run)
        # a worker's run stopped (its worker told to stop) goes back to the queue: it has not ended
        ended = None if queued and info.status == "stopped" else datetime.now(UTC)
        try:
            await context.ledger.save(info, ended_at=ended)
        except DATABASE_ERRORS as e:
            if queued:
                raise
            log.warning("run %s's end is not recorded in the database: %s", info.run_id, e)
