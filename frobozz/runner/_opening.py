"""How a run is opened: a stopped one taken up again (its directory, rebuilt from the database on a machine
that never had it; its budgets, which a resume may raise; refused when it has nothing left to play, when it
belongs to the queue, or when it is asked to play with other options than it began with), the turns
it has played taken into its context, a run played here recorded in the database too, its memory opened, and
claude's session, mirrored into the database so that a resume on any machine can continue it. Where the
database only helps (the record of a run played here, claude's transcripts), its failure is a log line and
the run goes on."""

from __future__ import annotations

import logging
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from frobozz.engine import EngineOptions, transcript_path
from frobozz.games import GameError, GameLibrary, read_story
from frobozz.memory import DATABASE_ERRORS, MemorySettings, MemoryStoreError, TranscriptStore

from . import _report
from ._context import NOT_RECORDED, RunContext
from ._ledger import RunLedger
from ._players import PlayerError, PlayerSpec
from ._run_memory import RunMemory
from ._store import RunFinishedError, RunInfo, RunNotFoundError, RunStore, TurnRecord
from .settings import RunnerSettings

if TYPE_CHECKING:
    from ._run import RunConfig

log = logging.getLogger("frobozz.runner")
QUEUED_MARK = "queued"  # in a run's directory: a worker played it here, the queue's database holds its record
FIXED = ("game", "player", "mode", "model", "multi", "prompt_file", "memory")  # what a resume cannot change


class ResumeError(Exception):
    """A resume this process must not play: the run belongs to the queue, or the options differ from the run's;
    the message says why and what to do."""


def mark_queued(store: RunStore) -> None:
    """The run's directory here, marked as a queued run's (a worker's): a `play --resume` of it is refused,
    even where no database is configured (the queue's may be the embedded one)."""
    (store.dir / QUEUED_MARK).write_text(
        "This run was queued (`frobozz play --queue`): its record is the queue's database, and\n"
        "`frobozz worker` plays it; `frobozz play --resume` refuses it.\n",
        encoding="utf-8",
    )


async def reopen(
    run_id: str, config: RunConfig, settings: RunnerSettings, ledger: RunLedger | None, *, queued: bool
) -> tuple[RunStore, str | None]:
    """The run `run_id`, held by this process (RunStore.hold) and taken up again to play on (a budget `config`
    sets replaces its own; run.json is not written here), and why it had stopped (its reason before). One that
    has ended, or whose budget is spent, is refused, unless `queued` (a worker's run: play() then plays what is
    left, or returns the result of one that has ended). Unless `queued`, a run of the queue is refused
    (ResumeError), and so is one that `config` asks to play otherwise than it began (a field of FIXED that
    `config` was given, and that differs from the run's)."""
    store = await _open_run(run_id, settings, ledger, queued=queued)
    store.hold()  # first: what is read next is as the last process to play it left it (RunBusyError if one does)
    try:
        store.reload()
        if not queued:
            if _marked(store):  # asked again under the lock: a worker marks the run's directory holding it
                raise ResumeError(_queues_own(run_id))
            _same_options(store.info, config, settings)
        stopped_by = store.info.reason
        if (
            store.info.status in ("queued", "running")
            or store.info.reason in ("interrupted", "time limit", "max turns", "max cost")
            or (store.info.reason or "").startswith(NOT_RECORDED)
        ):
            for name in ("max_turns", "max_cost", "max_seconds"):  # a resume may raise a budget
                value = getattr(config, name)
                if value is not None:
                    setattr(store.info, name, value)
            if not queued and _spent(store.info):
                raise RunFinishedError(_spent_how(store.info, config))
            if store.info.mode == "text":  # the game is taken up from it: damaged, said so, naming it (a traceback)
                store.snapshot()
            store.info.status, store.info.reason = "running", None  # (written once its player is ready: _opened)
            store.info.ended = None
        elif not queued:
            raise RunFinishedError(f"run {store.info.run_id} is finished ({_how_far(store.info)}): nothing to resume")
    except BaseException:
        store.let_go()
        raise
    return store, stopped_by


async def _open_run(run_id: str, settings: RunnerSettings, ledger: RunLedger | None, *, queued: bool) -> RunStore:
    """The run's directory here; on a machine that never had it, rebuilt from the database. Unless `queued` (a
    worker's), a run of the queue is refused before anything here is written."""
    store: RunStore | None
    try:
        store = RunStore.open(settings.runs_dir, run_id)
    except RunNotFoundError:
        if ledger is None:
            raise
        store = None
    if not queued:
        await _not_the_queues(run_id, store, ledger)
    if store is not None:
        return store
    assert ledger is not None
    try:
        return await ledger.checkout(run_id, settings.runs_dir)
    except DATABASE_ERRORS as e:
        raise RunNotFoundError(f"run {run_id} is not on this machine, and the database cannot say: {e}") from e


async def _not_the_queues(run_id: str, store: RunStore | None, ledger: RunLedger | None) -> None:
    """ResumeError if the run belongs to the queue: a worker played it here (its directory is marked), or the
    database has a job for it. Played here, it would not be recorded in the queue's database (the embedded one
    is the queue's by default, and plain play records nowhere without FROBOZZ_DATABASE_URL), and a worker
    would play it on from the database's record meanwhile or after, undoing what was played here."""
    queued = store is not None and _marked(store)
    if not queued and ledger is not None:
        try:  # (queued_at: written with its row, before its job is made)
            row = await ledger.get(run_id)
            queued = row["queued_at"] is not None or row["job_id"] is not None
        except RunNotFoundError:
            pass
        except DATABASE_ERRORS as e:  # (a run only the database has is refused by its checkout next)
            log.warning("the database cannot say whether run %s is queued: %s", run_id, e)
    if queued:
        raise ResumeError(_queues_own(run_id))


def _marked(store: RunStore) -> bool:
    return (store.dir / QUEUED_MARK).is_file()


def _queues_own(run_id: str) -> str:
    return (
        f"run {run_id} belongs to the queue (`play --queue`): `frobozz worker` plays it, a stopped one on "
        f"from its last turn, with the budgets it was queued with; `frobozz runs show {run_id}` says where "
        "it is. `play --resume` plays only runs started with plain `frobozz play`"
    )


def _same_options(info: RunInfo, config: RunConfig, settings: RunnerSettings) -> None:
    """ResumeError naming each option `config` was given (FIXED) that differs from what the run plays with: a
    run goes on as it began (its game, player, mode, model, prompt, memory); only its budgets may change."""
    given = config.model_fields_set
    differing = []
    if "game" in given and config.game != info.game:
        try:
            same = GameLibrary(settings).find(config.game, allow_path=True).md5 == info.story_md5
        except GameError:
            same = False
        if not same:
            differing.append(f"GAME {config.game} (it plays {info.game})")
    if "player" in given and config.player != info.player:
        try:
            same = PlayerSpec.parse(config.player).name == info.player
        except PlayerError:
            same = False
        if not same:
            differing.append(f"--player {config.player} (it plays with {info.player})")
    if "mode" in given and config.mode != info.mode:
        differing.append(f"--mode {config.mode} (it plays in {info.mode} mode)")
    if "model" in given and config.model is not None and config.model != info.model:
        differing.append(f"--model {config.model} (it plays with {info.model})")
    if "multi" in given and config.multi != info.multi:
        differing.append(
            "--multi (it plays one command a reply)" if config.multi else "--no-multi (it plays several a reply)"
        )
    if "prompt_file" in given and config.prompt_file is not None:
        if info.prompt_file is None or config.prompt_file.resolve() != Path(info.prompt_file).resolve():
            differing.append(f"--prompt-file {config.prompt_file} (it plays with {info.prompt_file or 'none'})")
    if "memory" in given and config.memory is not None:
        wanted = config.memory or _game_namespace(info)
        if wanted != info.memory_namespace:
            had = f"with memory {info.memory_namespace}" if info.memory_namespace else "without memory"
            differing.append(f"{f'--memory {config.memory}' if config.memory else '--memory'} (it plays {had})")
    if differing:
        raise ResumeError(
            f"run {info.run_id} goes on as it began, not with {', '.join(differing)}: leave "
            f"{'that' if len(differing) == 1 else 'those'} out (a resume may change --max-turns, --max-cost "
            "and --max-time)"
        )


def _game_namespace(info: RunInfo) -> str | None:
    from ._run import game_namespace  # (here, not above: _run imports this module)

    try:
        return game_namespace(read_story(info.story))
    except (GameError, OSError):
        return None


def _spent_how(info: RunInfo, config: RunConfig) -> str:
    """Why a stopped run has nothing left to play: a budget this resume gave that is not above what the run
    has used already, or the run's own budget, used up."""
    if config.max_turns is not None and info.turns >= config.max_turns:
        return (
            f"run {info.run_id} has played {info.turns} turns already, so --max-turns {config.max_turns} leaves "
            f"it nothing to play: --max-turns counts all its turns, so pass one above {info.turns} "
            f"(--max-turns {info.turns + 100} plays 100 more)"
        )
    if config.max_cost is not None and info.cost_usd >= config.max_cost:
        return (
            f"run {info.run_id} has cost ${info.cost_usd:.4f} already, so --max-cost {config.max_cost} leaves it "
            f"nothing to spend: --max-cost counts all it has cost, so pass one above {info.cost_usd:.4f}"
        )
    return (
        f"run {info.run_id} is finished ({_how_far(info)}): to play on, raise its budget (--max-turns N, "
        "--max-cost USD)"
    )


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
