"""What a run's engine Session is made of: claude's options (a scripted player's model in claude's place, the
database that mirrors claude's transcripts, the spans' attributes), the opening instructions, the producers
that bring claude the game and the observers that read what it does. In text mode the run holds the game
and each message is its answer; in tools mode claude plays through the game server, which the run configures
for it (its autosave, the memory's mailbox), and a game call made once the run has ended is refused. With
memory, claude has the cortex and handoff servers too. All of them are served in the run's own process once
the application has given the servers' factory (`serve_in_process`), else as stdio processes claude
starts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from frobozz import _spans
from frobozz._mailbox import Mailbox
from frobozz._plugin_off import plugin_off
from frobozz.engine import (
    EngineOptions,
    Event,
    HookInput,
    HookMatcher,
    HookOutput,
    Observer,
    Producer,
    Session,
    SystemInit,
)
from frobozz.engine.scripted import Handler, ScriptedModel
from frobozz.games import GameError, GameSession, StoryInfo

from ._catch_up import catch_up
from ._context import RunContext
from ._game_producers import GameProducer, ReplyCollector, ToolsProducer, ToolWatcher
from ._opening import transcripts
from ._prompts import PAUSED, game_message, instructions, load_template, status_header
from ._run_memory import TOOLS, TOOLS_NOTE, RunMemory
from ._store import RunInfo, RunStore
from .settings import RunnerSettings

ENDED = f"{PAUSED}: it has ended, and this call was not made. End your turn now, without another game call."
ANSWER_READ_WITHIN = 10.0  # seconds a game call waits for the answer before it to be read (it is there already)
CHANGING = ("new_game", "act", "undo", "save", "restore")  # the game tools that are not read-only
ENV_PREFIX = "FROBOZZ_"  # the servers' settings read FROBOZZ_* variables
GAME_TOOLS = ("new_game", "act", "look", "inventory", "undo", "save", "restore", "list_saves", "map", "history")


@dataclass
class SessionParts:
    """A run's engine Session, in parts: claude's options, the producers, the observers."""

    options: EngineOptions
    producers: list[Producer]
    observers: list[Observer]


ServerFactory = Callable[..., Any]  # `frobozz.servers.load_server`: (name, *, service, session, **settings) -> server
_serve_with: ServerFactory | None = None


def serve_in_process(factory: ServerFactory | None) -> None:
    """How this process makes MCP servers (the CLI gives `frobozz.servers.load_server`): a memory run's cortex and
    handoff, and a tools-mode run's game server, are then served in the run's own process, cortex, handoff and the
    game server's recall on its pool and embedding model (a text-mode memory run's first move came in 0.59x the
    time, a tools-mode one's in 0.37x, bench/memory_run_start.py). Without it (None, the default), claude starts
    them as stdio processes: the runner never imports the servers (design.md), it is handed their factory."""
    global _serve_with
    _serve_with = factory


def server_factory() -> ServerFactory | None:
    return _serve_with


@dataclass(frozen=True)
class McpServers:
    """MCP servers for claude's options (a memory run's cortex and handoff, tools mode's game): stdio configs, or
    in-process factories."""

    stdio: dict[str, Any] = field(default_factory=dict)
    in_process: dict[str, Callable[[], Any]] = field(default_factory=dict)


def _memory_servers(memory: RunMemory | None, settings: RunnerSettings) -> McpServers:
    """In the run's process when the application gave the servers' factory, else as two stdio processes claude
    starts; the same data folder either way."""
    if memory is None:
        return McpServers()
    stdio = memory.stdio_servers(_paths(settings))
    if (load := server_factory()) is None:
        return McpServers(stdio=stdio)
    # on the run's pool and embedding model; handoff signs a letter with the claude session served then
    return McpServers(in_process=_in_process(load, stdio, service=memory.service, session=memory.claude_session))


class _SessionKeeper:
    """Observer: remembers claude's session id in run.json, so --resume can continue it."""

    name = "session-id"

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def on_event(self, event: Event) -> None:
        if isinstance(event, SystemInit) and event.session_id and event.session_id != self.store.info.claude_session_id:
            self.store.info.claude_session_id = event.session_id
            self.store.save_info()


async def session_parts(
    stack: AsyncExitStack,
    context: RunContext,
    story: StoryInfo,
    settings: RunnerSettings,
    memory: RunMemory | None,
    scripted: Handler | None,
    cli_path: str | None,
    *,
    resumed: bool,
    queued: bool,
) -> SessionParts:
    """The run's session, in its mode. `scripted` answers in claude's place; what needs closing (its model,
    text mode's game) is closed with `stack`. `resumed`: the run has turns already, and claude is told it
    goes on; `queued`: a worker's run, whose game session any machine's game server has (tools mode)."""
    options = await _options(stack, context, scripted, cli_path)
    intro = _intro(context, memory)
    servers = _memory_servers(memory, settings)
    if context.info.mode == "text":
        parts = await _text_mode(
            context,
            story,
            stack=stack,
            settings=settings,
            memory=memory,
            options=options,
            intro=intro,
            servers=servers,
            resumed=resumed,
        )
    else:
        parts = await _tools_mode(
            context,
            story,
            settings=settings,
            memory=memory,
            options=options,
            intro=intro,
            servers=servers,
            resumed=resumed,
            queued=queued,
        )
    if memory is not None and memory.archive is not None:
        parts.observers.append(memory.archive)
    return parts


async def _options(
    stack: AsyncExitStack, context: RunContext, scripted: Handler | None, cli_path: str | None
) -> EngineOptions:
    """claude's options in either mode: its model (or the scripted player's), its transcripts mirrored into
    the database, the spans' attributes."""
    info, store = context.info, context.store
    env: dict[str, str] = {}
    if scripted is not None:
        model = await stack.enter_async_context(ScriptedModel(scripted))
        env.update(model.env())
        env["CLAUDE_CONFIG_DIR"] = str(store.dir / "claude")  # the scripted player's sessions stay with the run
    session_store = await transcripts(context)
    return EngineOptions(
        model=info.model,
        env=plugin_off(env),  # a game's claude is no conversation of the user's: the Frobozz plugin's hooks stay out
        cwd=store.dir,
        tools=(),
        cli_path=cli_path,
        session_store=session_store,
        session_project=f"frobozz-run-{info.run_id}",
        session_store_flush="eager",  # in tools mode one claude turn is many game turns
        trace_attributes={
            _spans.SESSION_KIND: "play",
            _spans.RUN_ID: info.run_id,
            _spans.GAME: info.game,
            _spans.RUN_MODE: info.mode,
        },
    )


def _intro(context: RunContext, memory: RunMemory | None) -> str:
    """The opening instructions: the prompt file's, else the mode's own; with memory, the note on its tools."""
    info = context.info
    template = load_template(Path(info.prompt_file) if info.prompt_file else None, tools=info.mode == "tools")
    intro = instructions(template, title=info.title, game=info.game, max_score=context.max_score, multi=info.multi)
    if memory is not None:
        intro = f"{intro.rstrip()}\n{TOOLS_NOTE}\n"
    return intro


async def _text_mode(
    context: RunContext,
    story: StoryInfo,
    *,
    stack: AsyncExitStack,
    settings: RunnerSettings,
    memory: RunMemory | None,
    options: EngineOptions,
    intro: str,
    servers: McpServers,
    resumed: bool,
) -> SessionParts:
    """Text mode: the run opens the game (where its snapshot left it), sends claude its answers and reads the
    command in each reply."""
    info, store = context.info, context.store
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
    producers: list[Producer] = [
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
    observers: list[Observer] = [collector, _SessionKeeper(store)]
    engine_options = (
        options
        if memory is None
        else replace(
            options,
            mcp_config={"mcpServers": servers.stdio} if servers.stdio else None,
            in_process_servers=servers.in_process,
            strict_mcp_config=True,
            allowed_tools=TOOLS,
        )
    )
    return SessionParts(engine_options, producers, observers)


async def _tools_mode(
    context: RunContext,
    story: StoryInfo,
    *,
    settings: RunnerSettings,
    memory: RunMemory | None,
    options: EngineOptions,
    intro: str,
    servers: McpServers,
    resumed: bool,
    queued: bool,
) -> SessionParts:
    """Tools mode: claude plays through the game server's tools (a resumed run's claude is told where its game
    is), and the run watches the calls."""
    info, store = context.info, context.store
    watcher = ToolWatcher(context, info.title, memory)
    shared = queued  # a queued run's game session is shared: any machine's server has it
    game_env = _game_server_env(
        settings,
        info,
        {
            **(memory.game_server_env(Mailbox(store.dir / "mailbox")) if memory is not None else {}),
            **({"FROBOZZ_GAME_SHARED_SESSIONS": "true"} if shared else {}),
        },
    )
    stdio_game = {"command": sys.executable, "args": ["-m", "frobozz", "serve", "game"], "env": game_env}
    if shared and resumed and info.game_session:
        await catch_up(context, stdio_game)  # the game may be ahead of the record (read as any MCP client reads it)
    game = _game_server(stdio_game, memory)
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
    producers: list[Producer] = [
        _ServersMade(
            context,
            ToolsProducer(
                context,
                watcher,
                first_message=first if memory is None else restart or "Start the game.",
                max_score=context.max_score,
                memory=memory,
                instructions=intro,
                inventory=lambda: _saved_inventory(story, settings, info),
            ),
        )
    ]
    observers: list[Observer] = [watcher, _SessionKeeper(store)]
    stdio = {**game.stdio, **servers.stdio}
    engine_options = replace(
        options,
        mcp_config={"mcpServers": stdio} if stdio else None,
        in_process_servers={**game.in_process, **servers.in_process},
        strict_mcp_config=True,
        allowed_tools=[f"mcp__game__{t}" for t in GAME_TOOLS] + (TOOLS if memory is not None else []),
        hooks={
            **options.hooks,
            "PreToolUse": [*options.hooks.get("PreToolUse", ()), _no_moves_after(context, watcher)],
        },
    )
    return SessionParts(engine_options, producers, observers)


class _ServersMade:
    """Producer: tools mode's play, once the in-process servers claude was given were made. One that could not be
    (the game server's settings refused, as FROBOZZ_MAX_SESSIONS=lots) is left out by the engine, and claude's
    status does not name it: the run fails at once, saying so as for a stdio server that failed to start
    (claude's status: "game: failed"), not after rounds of game calls to tools that are not there."""

    def __init__(self, context: RunContext, producer: Producer) -> None:
        self.context, self.producer = context, producer

    async def run(self, session: Session) -> None:
        failed: dict[str, Exception] = session.engine.in_process_failed  # (made as claude started, before this)
        if failed:
            problems = "; ".join(f"{name}: failed ({_why(e)})" for name, e in failed.items())
            self.context.finish(
                f"the game server did not start: MCP servers not connected: {problems}", status="failed"
            )
            return
        await self.producer.run(session)


def _why(error: Exception) -> str:
    """The error's first lines: pydantic's says which setting was wrong and why on its second and third."""
    lines = [line.strip() for line in str(error).splitlines()[:3] if line.strip()]
    return ": ".join([type(error).__name__, *lines])


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


def _no_moves_after(context: RunContext, watcher: ToolWatcher) -> HookMatcher:
    """A game tool claude calls once the run has ended is refused, and its turn stopped: claude is often
    mid-turn when a limit ends the run, and each move it went on to make put the game past the run's record
    (a resume restores the game as the server left it). A call that changes the game waits for the last such
    call to have been taken in: of a message's several acts, the one after the limit was asked about before
    the answer that ended the run was read, and made. (claude makes those calls one after another; only the
    game's read-only tools run side by side, and they need not wait.)"""
    before: list[str] = []  # the last call that changes the game claude asked about

    async def gate(hook: HookInput) -> HookOutput | None:
        if (hook.tool_name or "").rsplit("__", 1)[-1] in CHANGING:
            if before:
                with anyio.move_on_after(ANSWER_READ_WITHIN):
                    await watcher.took_in(before[-1])
            before[:] = [hook.tool_use_id] if hook.tool_use_id else []
        if not context.finished.is_set():
            return None
        return HookOutput(permission="deny", reason=ENDED, stop="the run has ended")

    return HookMatcher([gate], matcher="|".join(f"mcp__game__{t}" for t in GAME_TOOLS))


def _game_server_env(settings: RunnerSettings, info: RunInfo, memory_env: dict[str, str]) -> dict[str, str]:
    """The game server's settings for this run, as the environment of a stdio one: its data and games folders,
    the run's autosave slot, and what `memory_env` adds (the memory's recall and mailbox, shared sessions)."""
    env = {**_paths(settings), **memory_env}
    if info.autosave_slot:
        env["FROBOZZ_AUTOSAVE_SLOT"] = info.autosave_slot
    return env


def _game_server(stdio: dict[str, Any], memory: RunMemory | None) -> McpServers:
    """The game server for claude: in the run's own process when the application gave the servers' factory (no
    Python process to start before claude is ready; made afresh at each claude start, as claude would start a
    stdio one again), with the settings the stdio one's environment gives it; else that stdio server. Settings
    not given here come from the run's environment either way (claude's children inherit it). With memory, its
    recall after each act is on the run's pool and embedding model, as cortex's and handoff's are (a stdio one
    opens its own)."""
    load = server_factory()
    if load is None:
        return McpServers(stdio={"game": stdio})
    shared = {} if memory is None else {"service": memory.service}
    return McpServers(in_process=_in_process(load, {"game": stdio}, **shared))


def _in_process(
    load: Callable[..., Any], stdio: dict[str, dict[str, Any]], **shared: Any
) -> dict[str, Callable[[], Any]]:
    """The `stdio` servers served in the run's process instead, by the application's factory `load`, each with the
    settings its stdio environment gives it (one rule for every server: what claude would start is what is served
    here) and what it `shared` with the run (its MemoryService, the claude session it serves)."""
    return {
        name: partial(load, name, **shared, **{_setting(k): v for k, v in config["env"].items()})
        for name, config in stdio.items()
    }


def _setting(env_name: str) -> str:
    """The settings field an environment variable sets (pydantic-settings' own rule, env_prefix FROBOZZ_): the
    server's settings take the same strings from either (FROBOZZ_GAME_MAILBOX -> game_mailbox, a Path)."""
    assert env_name.startswith(ENV_PREFIX), env_name
    return env_name.removeprefix(ENV_PREFIX).lower()
