"""How a run is opened: a stopped one taken up again (its directory, rebuilt from the database on a machine
that never had it; its budgets, which a resume may raise; refused when it has nothing left to play), the turns
it has played taken into its context, a run played here recorded in the database too, its memory opened, and
claude's session, mirrored into the database so that a resume on any machine can continue it. Where the
database only helps (the record of a run played here, claude's transcripts), its failure is a log line and
the run goes on."""

from __future__ import annotations

import logging
import os
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from frobozz.engine import EngineOptions, transcript_path
from frobozz.memory import DATABASE_ERRORS, MemorySettings, MemoryStoreError, TranscriptStore

from . import _report
from ._context import RunContext
from ._ledger import RunLedger
from ._players import PlayerError
from ._run_memory import RunMemory
from ._store import RunFinishedError, RunInfo, RunNotFoundError, RunStore, TurnRecord
from .settings import RunnerSettings

if TYPE_CHECKING:
    from ._run import RunConfig

log = logging.getLogger("frobozz.runner")


async def reopen(
    run_id: str, config: RunConfig, settings: RunnerSettings, ledger: RunLedger | None, *, queued: bool
) -> tuple[RunStore, str | None]:
    """The run `run_id`, held by this process (RunStore.hold) and taken up again to play on (a budget `config`
    sets replaces its own; run.json is not written here), and why it had stopped (its reason before). One that
    has ended, or whose budget is spent, is refused, unless `queued` (a worker's run: play() then plays what is
    left, or returns the result of one that has ended)."""
    store = await _open_run(run_id, settings, ledger)
    store.hold()  # first: what is read next is as the last process to play it left it (RunBusyError if one does)
    try:
        store.reload()
        stopped_by = store.info.reason
        if store.info.status in ("queued", "running") or store.info.reason in (
            "interrupted",
            "time limit",
            "max turns",
            "max cost",
        ):
            for name in ("max_turns", "max_cost", "max_seconds"):  # a resume may raise a budget
                value = getattr(config, name)
                if value is not None:
                    setattr(store.info, name, value)
            if not queued and _spent(store.info):
                raise RunFinishedError(
                    f"run {store.info.run_id} is finished ({_how_far(store.info)}): to play on, "
                    "raise its budget (--max-turns N, --max-cost USD)"
                )
            store.info.status, store.info.reason = "running", None  # (written once its player is ready: _opened)
        elif not queued:
            raise RunFinishedError(f"run {store.info.run_id} is finished ({_how_far(store.info)}): nothing to resume")
    except BaseException:
        store.let_go()
        raise
    return store, stopped_by


async def _open_run(run_id: str, settings: RunnerSettings, ledger: RunLedger | None) -> RunStore:
    """The run's directory here; on a machine that never had it, rebuilt from the database."""
    try:
        return RunStore.open(settings.runs_dir, run_id)
    except RunNotFoundError:
        if ledger is None:
            raise
    try:
        return await ledger.checkout(run_id, settings.runs_dir)
    except DATABASE_ERRORS as e:
        raise RunNotFoundError(f"run {run_id} is not on this machine, and the database cannot say: {e}") from e


def _spent(info: RunInfo) -> bool:
    """Whether a stopped run's budget of turns or cost is used up (then a resume plays nothing)."""
    return (info.max_turns is not None and info.turns >= info.max_turns) or (
        info.max_cost is not None and info.cost_usd >= info.max_cost
    )


def _how_far(info: RunInfo) -> str:
    turns = f"{info.turns} of {info.max_turns} turns" if info.max_turns else f"{info.turns} turns"
    return f"{info.reason}, {turns}"


async def recorded(ledger: RunLedger, context: RunContext) -> None:
    """A run played here, recorded in the database too (for `frobozz runs` and the leaderboard) when one is
    configured; the database is help here, not a gate."""
    try:
        await ledger.add(context.info, queued=False)
    except DATABASE_ERRORS as e:
        context.ledger = None
        log.warning("run %s is not recorded in the database: %s", context.info.run_id, e)


def take_up(context: RunContext, stopped_by: str | None) -> list[TurnRecord]:
    """The turns the run has played so far (none, for a new run), taken into `context`; the transcript begun
    for a new run, or marked where a stopped one resumed (`stopped_by`: why it had stopped)."""
    store, info = context.store, context.info
    records = store.turns()
    context.resume_from(records)
    info.max_score = context.max_score
    if not records and not (store.dir / "transcript.md").exists():
        _report.start_transcript(store)
    elif records and stopped_by is not None:
        _report.mark_resumed(store, records[-1].turn, stopped_by or "killed")
    return records


async def open_memory(stack: AsyncExitStack, store: RunStore, settings: RunnerSettings) -> RunMemory:
    """The run's memory, its loop session kept in run.json (a resume takes up its seen-set)."""
    info = store.info
    try:
        memory = await RunMemory.open(
            MemorySettings(),
            namespace=info.memory_namespace or "",
            run_id=info.run_id,
            session_id=info.memory_session,
            threshold=settings.handoff_threshold,
            context_window=settings.context_window,
            deadline=settings.memory_deadline,
        )
    except MemoryStoreError as e:
        info.status, info.reason = "failed", f"memory could not be opened: {e}"
        store.save_info()
        raise PlayerError(f"--memory: {e}") from e
    stack.push_async_callback(memory.aclose)
    if info.memory_session != memory.session_id:
        info.memory_session = memory.session_id
        store.save_info()
    return memory


async def transcripts(context: RunContext) -> TranscriptStore | None:
    """claude's transcripts mirrored into the run's database (when there is one), so the run's claude
    session can be resumed on any machine that has the database."""
    if context.ledger is None:
        return None
    try:
        return await TranscriptStore.on(context.ledger.pool)
    except DATABASE_ERRORS as e:
        log.warning("run %s's claude session is kept on this machine only: %s", context.info.run_id, e)
        return None


async def resumable(info: RunInfo, options: EngineOptions) -> str | None:
    """The run's claude session, if it can be resumed: its transcript is here, or in the database."""
    session = info.claude_session_id
    if not session:
        return None
    if transcript_path(session, options.cwd or ".", {**os.environ, **options.env}).is_file():
        return session
    if options.session_store is None:
        return None
    try:
        listed = await options.session_store.list_sessions(options.session_project or "")
    except DATABASE_ERRORS as e:
        log.warning("run %s: the database cannot say whether it has claude session %s: %s", info.run_id, session, e)
        return None
    return session if any(s["session_id"] == session for s in listed) else None
