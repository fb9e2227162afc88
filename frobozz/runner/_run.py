"""One run: a game, a player, a mode, budgets; played to its end, recorded turn by turn, resumable.

play() reads top to bottom: the run opened or taken up again (_opening), its engine session put together for
its mode (_session_parts), played until it ends and its end written (_ending)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from frobozz.engine import MODEL_NAME, Session
from frobozz.engine.scripted import Handler
from frobozz.games import GameLibrary, StoryInfo, by_md5, read_story
from frobozz.memory import DATABASE_ERRORS

from ._context import RunContext
from ._ending import keep_lessons, on_signals, until_finished, write_up
from ._ledger import RunLedger
from ._opening import open_memory, recorded, reopen, resumable, take_up
from ._players import (
    SEVERAL,
    PlayerError,
    PlayerSpec,
    claude_readiness,
    commands_for,
    script_commands,
    text_handler,
    tool_handler,
)
from ._run_memory import interrupt
from ._session_parts import session_parts
from ._store import RunInfo, RunStore, TurnRecord, new_run_id
from .settings import RunnerSettings

log = logging.getLogger("frobozz.runner")


class RunConfig(BaseModel):
    """What to play and how (`frobozz play`'s options): the game, the player, the mode, the budgets, a run to
    resume."""

    game: str = "zork1"
    player: str = "claude"
    mode: Literal["text", "tools"] = "text"
    model: str | None = Field(default=None, pattern=f"^{MODEL_NAME.pattern}$")  # (claude's: as routines take)
    max_turns: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)  # (inf: no limit, leave it out)
    multi: bool = False
    prompt_file: Path | None = None
    resume: str | None = None
    memory: str | None = Field(
        default=None,
        pattern=r"^([A-Za-z0-9][A-Za-z0-9_.:-]{0,99})?$",
        description=("Play with memory in this namespace ('': the game's own); None: without memory."),
    )


class RunResult(BaseModel):
    """How a run ended: its score, turns, cost and why it stopped."""

    run_id: str
    game: str
    player: str
    mode: str
    score: int | None
    max_score: int | None
    moves: int | None
    turns: int
    won: bool
    done: bool
    reason: str | None
    status: str = "finished"  # "failed": it ended on an error (claude's, the game's); "stopped": by a signal
    cost_usd: float
    transcript: str
    memory_namespace: str | None = None
    memories_recalled: int = 0
    memories_stored: int = 0
    compactions: int = 0
    handoffs: int = 0


def _title(story: StoryInfo) -> str:
    known = by_md5(story.md5)
    return known.title.split(" (")[0] if known else story.path.stem


def game_namespace(story: StoryInfo) -> str:
    """The memory every run of a game shares: its catalogue name without the release (zork1-r119 is
    zork1 too), or its file's name made into a namespace."""
    known = by_md5(story.md5)
    name = known.name.split("-r")[0] if known else re.sub(r"[^A-Za-z0-9_.:-]+", "-", story.path.stem).strip("-.")
    return (name or "game")[:100]


def new_info(config: RunConfig, settings: RunnerSettings, player: PlayerSpec | None = None) -> RunInfo:
    """A new run of `config`, not yet started (its game found, its player known)."""
    player = player or PlayerSpec.parse(config.player)
    story = GameLibrary(settings).find(config.game, allow_path=True)
    run_id = new_run_id()
    return RunInfo(
        run_id=run_id,
        game=config.game,
        story=str(story.path),
        story_md5=story.md5,
        title=_title(story),
        player=player.name,
        mode=config.mode,
        model=config.model or settings.claude_model,
        max_turns=config.max_turns,
        max_cost=config.max_cost,
        max_seconds=config.max_seconds,
        multi=config.multi,
        prompt_file=str(config.prompt_file) if config.prompt_file else None,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        autosave_slot=f"run-{run_id}" if config.mode == "tools" else None,
        memory_namespace=None if config.memory is None else config.memory or game_namespace(story),
    )


async def play(
    config: RunConfig,
    settings: RunnerSettings | None = None,
    *,
    handler: Handler | None = None,
    on_turn: Callable[[RunContext, TurnRecord], None] | None = None,
    handle_signals: bool = False,
    cli_path: str | None = None,
    ledger: RunLedger | None = None,
    queued: bool = False,
    stop: anyio.Event | None = None,
) -> RunResult:
    """Play one run to its end. `handler` replaces the scripted player's model (tests, demos); `ledger`
    records the run and commits each turn to the database too (`queued`: a worker's run, which the database
    holds, so it stops when the database goes away); `stop` set: stop at the next turn boundary.
    `handle_signals`: SIGINT and SIGTERM stop it as `stop` does, from the start (one before its first turn, even
    before its files are made, leaves it stopped, "interrupted" and resumable, as one later does: it was left
    "running", and listed as killed); a second signal stops it at once (KeyboardInterrupt)."""
    settings = settings or RunnerSettings()
    if not handle_signals:
        return await _play(config, settings, handler, on_turn, cli_path, ledger, queued=queued, stop=stop)
    interrupted, result, error = anyio.Event(), None, None
    async with anyio.create_task_group() as tg:
        await tg.start(on_signals, interrupted, tg.cancel_scope)
        if stop is not None:
            tg.start_soon(_passed_on, stop, interrupted)
        try:
            result = await _play(config, settings, handler, on_turn, cli_path, ledger, queued=queued, stop=interrupted)
        except Exception as e:  # noqa: BLE001 - raised below as it is, not in this task group's exception group
            error = e
        tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if result is None:  # a second signal
        raise KeyboardInterrupt
    return result


async def _passed_on(stop: anyio.Event, to: anyio.Event) -> None:
    await stop.wait()
    to.set()


async def _play(
    config: RunConfig,
    settings: RunnerSettings,
    handler: Handler | None,
    on_turn: Callable[[RunContext, TurnRecord], None] | None,
    cli_path: str | None,
    ledger: RunLedger | None,
    *,
    queued: bool,
    stop: anyio.Event | None,
) -> RunResult:
    store, player, stopped_by = await _opened(
        config, settings, ledger, queued=queued, handler=handler, cli_path=cli_path
    )
    async with _failed_on_error(store, new=config.resume is None, ledger=None if queued else ledger):
        info = store.info  # (the run held by this process until it ends)
        story = read_story(info.story)
        if info.status != "running":
            return _result(store)
        commands, scripted = _scripted(player, story, info, handler)
        known = by_md5(story.md5)
        context = RunContext(
            store,
            max_score=known.max_score if known else None,
            correction_limit=settings.correction_limit,
            on_turn=on_turn,
            priced=scripted is None,
            script_turns=None if commands is None else len(commands),
            ledger=ledger,
            ledger_required=queued,
        )
        if ledger is not None and not queued:
            await recorded(ledger, context)
        resumed = bool(take_up(context, stopped_by))  # the run has played turns already

        async with AsyncExitStack() as stack:
            memory = await open_memory(stack, store, settings) if info.memory_namespace else None
            parts = await session_parts(
                stack,
                context,
                story,
                settings,
                memory,
                scripted,
                cli_path,
                resumed=resumed,
                queued=queued,
            )
            resume_id = await resumable(info, parts.options) if resumed else None
            session = Session(
                parts.options, producers=parts.producers, observers=parts.observers, resume=resume_id, consume=False
            )
            if memory is not None:
                memory.claude = session  # before claude starts: handoff signs its letters with its session id
            async with session:
                context.claude_started(session.engine)  # (before its first turn: no message is sent yet)
                await until_finished(context, stop=stop, keep_ledger=ledger is not None)
                if memory is not None and info.status == "finished":
                    await keep_lessons(memory, session, context)
                elif info.mode == "tools":
                    with anyio.move_on_after(5):
                        await interrupt(session)  # claude may be mid-turn, still calling tools
        await write_up(context, queued=queued)
        return _result(store)


@asynccontextmanager
async def _failed_on_error(store: RunStore, *, new: bool, ledger: RunLedger | None) -> AsyncIterator[None]:
    """The run held by this process (RunStore.hold) until it ends. A new run that an error ends before it has
    ended (its story file not to be opened, its memory or claude not to be started) is failed, with the error as
    its reason: it was left "running", and listed as killed; and so is its row in the database (`ledger`, a run
    played here), made if the error came before it was: the row said "running" for good. (A resumed run so
    ended is left as one killed is, to be resumed again; a signal's end is no error: it stays resumable.)"""
    with store:
        try:
            yield
        except Exception as e:
            info = store.info
            if not new or info.status == "queued":
                raise
            try:
                if info.status == "running" or (info.status == "failed" and not info.ended):  # (memory's: failed)
                    if info.status == "running":
                        info.status, info.reason = "failed", f"it could not be played: {e}"[:500]
                    info.ended = datetime.now(UTC).isoformat(timespec="seconds")
                    store.save_info()
            finally:
                if ledger is not None:  # as its run.json says it (the ended one: failed, or stopped by its disk)
                    await _ended_in(ledger, info)
            raise


async def _ended_in(ledger: RunLedger, info: RunInfo) -> None:
    """A new run played here that an error ended, said so in the database as its run.json says it (the database
    is help here, not a gate: a log line)."""
    try:
        with anyio.fail_after(30, shield=True):
            await ledger.add(info, queued=False)  # (none yet when the error came before the run was recorded)
            await ledger.save(info, ended_at=datetime.fromisoformat(info.ended) if info.ended else None)
    except (*DATABASE_ERRORS, TimeoutError) as e:
        log.warning("run %s's end is not recorded in the database: %s", info.run_id, e)


async def _opened(
    config: RunConfig,
    settings: RunnerSettings,
    ledger: RunLedger | None,
    *,
    queued: bool,
    handler: Handler | None,
    cli_path: str | None,
) -> tuple[RunStore, PlayerSpec, str | None]:
    """The run to play and its player: the run `config.resume` names, taken up again, or a new one, made once
    its player is ready (claude installed and logged in, unless `handler` answers in its place); with why a
    resumed run had stopped (None: a new run)."""
    if config.resume is None:
        player = _ready(config.player, config.prompt_file, handler, cli_path)
        if player.kind == "walkthrough" and handler is None:  # a game with no walkthrough makes no run (it made
            commands_for(player, GameLibrary(settings).find(config.game, allow_path=True))  # one, left "running")
        elif player.script is not None:
            script_commands(player.script)  # a script that cannot be played makes no run
        return RunStore.create(settings.runs_dir, new_info(config, settings, player), hold=True), player, None
    store, stopped_by = await reopen(config.resume, config, settings, ledger, queued=queued)  # ("": not a run id)
    try:
        prompt_file = Path(store.info.prompt_file) if store.info.prompt_file else None
        player = _ready(store.info.player, prompt_file, handler, cli_path)
        if store.info.status == "running":  # running again: killed from here on, it is listed as killed
            store.save_info()  # (only now: a resume refused for its player left the run as it was)
    except BaseException:
        store.let_go()
        raise
    return store, player, stopped_by


def _ready(player_spec: str, prompt_file: Path | None, handler: Handler | None, cli_path: str | None) -> PlayerSpec:
    """The run's player, ready to play: claude installed and logged in (unless `handler` answers in its
    place), the prompt file readable."""
    player = PlayerSpec.parse(player_spec)
    if player.kind == "claude" and handler is None:
        problem = claude_readiness(cli_path)
        if problem:
            raise PlayerError(problem)
    if prompt_file is not None:
        check_prompt_file(prompt_file)
    return player


def check_prompt_file(prompt_file: Path) -> None:
    """A prompt file that cannot be played from makes no run (one not UTF-8 ended a new run in a traceback,
    the run left "running" with no turn)."""
    try:
        prompt_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PlayerError(f"the prompt file {prompt_file} cannot be read: {e}") from None


def _scripted(
    player: PlayerSpec, story: StoryInfo, info: RunInfo, handler: Handler | None
) -> tuple[list[str] | None, Handler | None]:
    """The commands a walkthrough or script player plays, and the scripted model that answers in claude's
    place: `handler` if given, else one that plays those commands (None, None: claude plays)."""
    commands = None if player.kind == "claude" or handler is not None else commands_for(player, story)
    several = SEVERAL if info.multi else 1  # commands in one of the scripted model's messages
    scripted = handler or (
        None
        if commands is None
        else (
            text_handler(commands, several=several)
            if info.mode == "text"
            else tool_handler(commands, info.game, several=several)
        )
    )
    return commands, scripted


def _result(store: RunStore) -> RunResult:
    info = store.info
    return RunResult(
        run_id=info.run_id,
        game=info.game,
        player=info.player,
        mode=info.mode,
        score=info.score,
        max_score=info.max_score,
        moves=info.moves,
        turns=info.turns,
        won=info.won,
        done=info.done,
        reason=info.reason,
        status=info.status,
        cost_usd=info.cost_usd,
        transcript=str(store.transcript),
        memory_namespace=info.memory_namespace,
        memories_recalled=info.memories_recalled,
        memories_stored=info.memories_stored,
        compactions=info.compactions,
        handoffs=info.handoffs,
    )
