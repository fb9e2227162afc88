"""One run: a game, a player, a mode, budgets; played to its end, recorded turn by turn, resumable."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from frobozz import _spans
from frobozz._mailbox import Mailbox
from frobozz.engine import (
    EngineOptions,
    Event,
    HookInput,
    HookMatcher,
    HookOutput,
    Session,
    SystemInit,
    transcript_path,
)
from frobozz.engine.scripted import Handler, ScriptedModel
from frobozz.games import GameError, GameLibrary, GameSession, StoryInfo, by_md5, read_story
from frobozz.memory import DATABASE_ERRORS, MemorySettings, MemoryStoreError, TranscriptStore

from . import _report
from ._catch_up import catch_up
from ._context import RunContext
from ._game_producers import GameProducer, ReplyCollector, ToolsProducer, ToolWatcher
from ._ledger import RunLedger
from ._players import PlayerError, PlayerSpec, claude_readiness, commands_for, text_handler, tool_handler
from ._prompts import PAUSED, game_message, instructions, load_template, status_header
from ._run_memory import TOOLS, TOOLS_NOTE, RunMemory, interrupt
from ._store import RunFinishedError, RunInfo, RunNotFoundError, RunStore, TurnRecord, new_run_id
from .settings import RunnerSettings

log = logging.getLogger("frobozz.runner")
ENDED = f"{PAUSED}: it has ended, and this call was not made. End your turn now, without another game call."
GAME_TOOLS = ("new_game", "act", "look", "inventory", "undo", "save", "restore", "list_saves", "map", "history")


class RunConfig(BaseModel):
    """What to play and how (`frobozz play`'s options): the game, the player, the mode, the budgets, a run to
    resume."""

    game: str = "zork1"
    player: str = "claude"
    mode: Literal["text", "tools"] = "text"
    model: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0)
    max_seconds: float | None = Field(default=None, gt=0)
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
    cost_usd: float
    transcript: str
    memory_namespace: str | None = None
    memories_recalled: int = 0
    memories_stored: int = 0
    compactions: int = 0
    handoffs: int = 0


class _SessionKeeper:
    """Observer: remembers claude's session id in run.json, so --resume can continue it."""

    name = "session-id"

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def on_event(self, event: Event) -> None:
        if isinstance(event, SystemInit) and event.session_id and event.session_id != self.store.info.claude_session_id:
            self.store.info.claude_session_id = event.session_id
            self.store.save_info()


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
    holds, so it stops when the database goes away); `stop` set: stop at the next turn boundary."""
    settings = settings or RunnerSettings()
    stopped_by: str | None = None
    if config.resume:
        store = await _open_run(config.resume, settings, ledger)
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
            store.info.status, store.info.reason = "running", None
        elif not queued:
            raise RunFinishedError(f"run {store.info.run_id} is finished ({_how_far(store.info)}): nothing to resume")
        player = PlayerSpec.parse(store.info.player)
    else:
        player = PlayerSpec.parse(config.player)
        store = None
    if player.kind == "claude" and handler is None:
        problem = claude_readiness(cli_path)
        if problem:
            raise PlayerError(problem)
    if store is None:
        store = RunStore.create(settings.runs_dir, new_info(config, settings, player))
    info = store.info
    story = read_story(info.story)
    if info.status != "running":
        return _result(store)
    commands = None if player.kind == "claude" or handler is not None else commands_for(player, story)
    scripted = handler or (
        None
        if commands is None
        else (text_handler(commands) if info.mode == "text" else tool_handler(commands, info.game))
    )
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
        await _recorded(ledger, context)
    records = store.turns()
    context.resume_from(records)
    info.max_score = context.max_score
    if not records and not (store.dir / "transcript.md").exists():
        _report.start_transcript(store)
    elif records and stopped_by is not None:
        _report.mark_resumed(store, records[-1].turn, stopped_by or "killed")

    async with AsyncExitStack() as stack:
        memory = await _open_memory(stack, store, settings) if info.memory_namespace else None
        env: dict[str, str] = {}
        if scripted is not None:
            model = await stack.enter_async_context(ScriptedModel(scripted))
            env.update(model.env())
            env["CLAUDE_CONFIG_DIR"] = str(store.dir / "claude")  # the scripted player's sessions stay with the run
        transcripts = await _transcripts(context)
        options = EngineOptions(
            model=info.model,
            env=env,
            cwd=store.dir,
            tools=(),
            cli_path=cli_path,
            session_store=transcripts,
            session_project=f"frobozz-run-{info.run_id}",
            session_store_flush="eager",  # in tools mode one claude turn is many game turns
            trace_attributes={
                _spans.SESSION_KIND: "play",
                _spans.RUN_ID: info.run_id,
                _spans.GAME: info.game,
                _spans.RUN_MODE: info.mode,
            },
        )
        template = load_template(Path(info.prompt_file) if info.prompt_file else None, tools=info.mode == "tools")
        intro = instructions(template, title=info.title, game=info.game, max_score=context.max_score, multi=info.multi)
        if memory is not None:
            intro = f"{intro.rstrip()}\n{TOOLS_NOTE}\n"
        resumed = bool(records)
        servers = memory.servers(_paths(settings)) if memory is not None else {}

        if info.mode == "text":
            game = await GameSession.open(story, settings)
            stack.push_async_callback(game.aclose)
            snapshot = store.snapshot()
            if snapshot:
                await game.resume({k: v for k, v in snapshot.items() if k != "record"}, [])
            context.max_score = context.max_score or game.max_score
            if not resumed:
                info.start_location = game.current.location
            collector = ReplyCollector(context, memory)
            header = status_header(info.title, game.current, context.max_score, info.turns, info.max_turns)
            note = "(The run was stopped and has now resumed. This is where you are.)\n\n" if resumed else ""
            first = f"{intro}\n{game_message(header, note + game.current.text)}"
            producers: list = [
                GameProducer(
                    game,
                    context,
                    collector.replies,
                    first_message=first,
                    multi=info.multi,
                    memory=memory,
                    instructions=intro,
                    note=note,
                )
            ]
            observers: list = [collector, _SessionKeeper(store)]
            engine_options = (
                options
                if memory is None
                else replace(options, mcp_config={"mcpServers": servers}, strict_mcp_config=True, allowed_tools=TOOLS)
            )
        else:
            watcher = ToolWatcher(context, info.title, memory)
            shared = queued  # a queued run's game session is shared: any machine's server has it
            config_ = _game_server_config(
                settings,
                info,
                {
                    **(memory.game_server_env(Mailbox(store.dir / "mailbox")) if memory is not None else {}),
                    **({"FROBOZZ_GAME_SHARED_SESSIONS": "true"} if shared else {}),
                },
            )
            if shared and resumed and info.game_session:
                await catch_up(context, config_["mcpServers"]["game"])  # the game may be ahead of the record
            restart = (
                ""
                if not resumed
                else f"The run was stopped and has resumed. {_header(info, context)}: your game is session_id "
                f"{info.game_session}, just where you left it: keep playing it with act."
                if shared and info.game_session
                else f'The run was stopped and has resumed: call new_game with game "{info.game}", then '
                f"restore with slot '{info.autosave_slot}', and keep playing."
            )
            first = f"{intro}\n{restart}" if restart else intro
            producers = [
                ToolsProducer(
                    context,
                    watcher,
                    first_message=first if memory is None else restart or "Start the game.",
                    max_score=context.max_score,
                    memory=memory,
                    instructions=intro,
                    inventory=lambda: _saved_inventory(story, settings, info),
                )
            ]
            observers = [watcher, _SessionKeeper(store)]
            config_["mcpServers"].update(servers)
            engine_options = replace(
                options,
                mcp_config=config_,
                strict_mcp_config=True,
                allowed_tools=[f"mcp__game__{t}" for t in GAME_TOOLS] + (TOOLS if memory is not None else []),
                hooks={**options.hooks, "PreToolUse": [*options.hooks.get("PreToolUse", ()), _no_moves_after(context)]},
            )
        if memory is not None and memory.archive is not None:
            observers.append(memory.archive)

        resume_id = await _resumable(info, engine_options) if resumed else None
        async with Session(
            engine_options, producers=producers, observers=observers, resume=resume_id, consume=False
        ) as session:
            async with anyio.create_task_group() as tg:
                if handle_signals:
                    tg.start_soon(_stop_on_signal, context)
                if stop is not None:
                    tg.start_soon(_stop_on_event, context, stop)
                if ledger is not None:
                    tg.start_soon(context.keep_ledger)
                with anyio.move_on_after(info.max_seconds or float("inf")) as timer:
                    await context.finished.wait()
                if timer.cancelled_caught:
                    context.finish("time limit")
                with anyio.move_on_after(60):
                    await context.committed()  # the turns played are in the database before the run ends
                tg.cancel_scope.cancel()
            if memory is not None and info.status == "finished":
                await _keep_lessons(memory, session, context)
            elif info.mode == "tools":
                with anyio.move_on_after(5):
                    await interrupt(session)  # claude may be mid-turn, still calling tools
    _report.finish(store, context.records, context.max_score, start=info.start_location)
    if context.ledger is not None:  # (None after the database went away mid-run)
        try:
            await context.ledger.save(info, ended_at=datetime.now(UTC))
        except DATABASE_ERRORS as e:
            if queued:
                raise
            log.warning("run %s's end is not recorded in the database: %s", info.run_id, e)
    return _result(store)


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


async def _transcripts(context: RunContext) -> TranscriptStore | None:
    """claude's transcripts mirrored into the run's database (when there is one), so the run's claude
    session can be resumed on any machine that has the database."""
    if context.ledger is None:
        return None
    try:
        return await TranscriptStore.on(context.ledger.pool)
    except DATABASE_ERRORS as e:
        log.warning("run %s's claude session is kept on this machine only: %s", context.info.run_id, e)
        return None


async def _resumable(info: RunInfo, options: EngineOptions) -> str | None:
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


async def _recorded(ledger: RunLedger, context: RunContext) -> None:
    """A run played here, recorded in the database too (for `frobozz runs` and the leaderboard) when one is
    configured; the database is help here, not a gate."""
    try:
        await ledger.add(context.info, queued=False)
    except DATABASE_ERRORS as e:
        context.ledger = None
        log.warning("run %s is not recorded in the database: %s", context.info.run_id, e)


async def _open_memory(stack: AsyncExitStack, store: RunStore, settings: RunnerSettings) -> RunMemory:
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


async def _keep_lessons(memory: RunMemory, session: Session, context: RunContext) -> None:
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


async def _saved_inventory(story: StoryInfo, settings: RunnerSettings, info: RunInfo) -> str | None:
    """Tools mode: what the player carries, read from the game server's autosave (no move is spent)."""
    if not info.autosave_slot:
        return None
    try:
        game = await GameSession.open(story, settings)
        try:
            await game.restore(info.autosave_slot)
            return (await game.peek("inventory")).text
        finally:
            await game.aclose(journal=False)
    except GameError:
        return None


def _header(info: RunInfo, context: RunContext) -> str:
    current = context.current
    return status_header(info.title, current, context.max_score, info.turns, info.max_turns) if current else ""


def _paths(settings: RunnerSettings) -> dict[str, str]:
    env = {"FROBOZZ_DATA_DIR": str(settings.data_dir)}
    if settings.games_dir:
        env["FROBOZZ_GAMES_DIR"] = str(settings.games_dir)
    return env


def _no_moves_after(context: RunContext) -> HookMatcher:
    """A game tool claude calls once the run has ended is refused, and its turn stopped: claude is often
    mid-turn when a limit ends the run, and each move it went on to make put the game past the run's record
    (a resume restores the game as the server left it)."""

    async def gate(hook: HookInput) -> HookOutput | None:
        if not context.finished.is_set():
            return None
        return HookOutput(permission="deny", reason=ENDED, stop="the run has ended")

    return HookMatcher([gate], matcher="|".join(f"mcp__game__{t}" for t in GAME_TOOLS))


def _game_server_config(settings: RunnerSettings, info: RunInfo, memory_env: dict[str, str]) -> dict:
    env = {**_paths(settings), **memory_env}
    if info.autosave_slot:
        env["FROBOZZ_AUTOSAVE_SLOT"] = info.autosave_slot
    return {"mcpServers": {"game": {"command": sys.executable, "args": ["-m", "frobozz", "serve", "game"], "env": env}}}


async def _stop_on_event(context: RunContext, stop: anyio.Event) -> None:
    await stop.wait()
    context.finish("interrupted", status="stopped")


async def _stop_on_signal(context: RunContext) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            context.finish("interrupted", status="stopped")
            return


def _spent(info: RunInfo) -> bool:
    """Whether a stopped run's budget of turns or cost is used up (then a resume plays nothing)."""
    return (info.max_turns is not None and info.turns >= info.max_turns) or (
        info.max_cost is not None and info.cost_usd >= info.max_cost
    )


def _how_far(info: RunInfo) -> str:
    turns = f"{info.turns} of {info.max_turns} turns" if info.max_turns else f"{info.turns} turns"
    return f"{info.reason}, {turns}"


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
        cost_usd=info.cost_usd,
        transcript=str(store.transcript),
        memory_namespace=info.memory_namespace,
        memories_recalled=info.memories_recalled,
        memories_stored=info.memories_stored,
        compactions=info.compactions,
        handoffs=info.handoffs,
    )
