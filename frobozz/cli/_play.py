"""`frobozz play GAME`: claude (or a scripted player) plays a game headless, with a live view."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from frobozz.games import CATALOGUE, GameError, GameLibrary, GameNotFoundError, GamesSettings, install

from ._database import say_postgres_stays
from ._output import err
from ._trace import start_tracing, trace_option

out = Console()


def ensure_game(game: str, settings: GamesSettings, *, url: str | None = None) -> None:
    """A catalogued game that is nowhere to be found is installed first (downloaded, md5-checked)."""
    try:
        GameLibrary(settings).find(game, allow_path=True)
    except GameNotFoundError:
        if game.strip().lower() not in CATALOGUE:
            raise
        err.print(f"{game} is not installed: installing it into {settings.installed_games_dir}", markup=False)
        anyio.run(lambda: install(game, settings.installed_games_dir, url=url))


def play(
    ctx: typer.Context,
    game: str = typer.Argument("zork1", help="A catalogue name, a story file name, or a path."),
    player: str = typer.Option(
        "claude",
        help="claude, walkthrough, script:FILE, or auto (claude when it "
        "is installed and logged in, else the walkthrough).",
    ),
    mode: str = typer.Option(
        "text",
        help="text (the runner reads commands from replies) or tools (claude plays through the game server's tools).",
    ),
    model: str = typer.Option(None, help="The model claude plays with."),
    max_turns: int = typer.Option(None, min=1, help="Stop after this many commands."),
    max_cost: float = typer.Option(None, min=0.0001, help="Stop when claude's cost reaches this (USD)."),
    max_time: float = typer.Option(None, min=0.1, help="Stop after this many seconds."),
    multi: bool = typer.Option(False, help="Run several commands from one reply, in order."),
    prompt_file: Path = typer.Option(None, exists=True, dir_okay=False, help="Play instructions to use instead."),
    resume: str = typer.Option(None, help="Continue the run with this id after a crash or a stop."),
    runs: int = typer.Option(1, min=1, max=64, help="How many runs."),
    parallel: int = typer.Option(1, min=1, max=16, help="How many runs at once."),
    as_json: bool = typer.Option(False, "--json", help="Print one final JSON object (a list for --runs)."),
    memory: str = typer.Option(
        None,
        "--memory",
        metavar="[NAMESPACE]",
        help=(
            "Play with long-term memory (cortex and handoff as tools, orientation, recall, hand-off, lessons kept "
            "for the next run), in NAMESPACE (default: the game's name, shared by all its runs)."
        ),
    ),
    queue: bool = typer.Option(
        False,
        "--queue",
        help=(
            "Queue the runs in the database (FROBOZZ_DATABASE_URL, or the embedded one) for `frobozz worker`s "
            "to play, and print their ids."
        ),
    ),
    trace: bool = trace_option(),
) -> None:
    """Play GAME headless: claude drives the real CLI; the game answers each command."""
    start_tracing(trace, "frobozz-play")
    from frobozz.engine import EngineError, model_name_problem
    from frobozz.runner import (
        LiveView,
        PlayerError,
        PlayerSpec,
        ResumeError,
        RunBusyError,
        RunConfig,
        RunFinishedError,
        RunnerSettings,
        RunNotFoundError,
        claude_readiness,
        play,
        score_text,
        serve_in_process,
        summary_table,
    )
    from frobozz.servers import load_server

    serve_in_process(load_server)  # the game (tools mode), cortex and handoff (--memory) in this process
    if mode not in ("text", "tools"):
        raise typer.BadParameter("use text or tools", param_hint="--mode")
    if resume is None and player != "auto":
        try:  # a usage error, as a bad --mode is (it was said with status 1)
            PlayerSpec.parse(player)
        except PlayerError as e:
            raise typer.BadParameter(str(e), param_hint="--player") from None
    if player == "auto" and resume is None:  # (a resumed run plays with its own player)
        problem = claude_readiness()
        player = "claude" if problem is None else "walkthrough"
        reason = problem.split("; or play offline", 1)[0].split(", or play offline", 1)[0] if problem else None
        err.print(
            f"[bold]playing with {player}[/bold]"
            + (f": {escape(reason)}" if reason else ": claude is installed and logged in")
        )
    from pydantic import ValidationError

    options: dict[str, Any] = {
        "game": game,
        "player": player,
        "mode": mode,
        "model": model,
        "multi": multi,
        "prompt_file": prompt_file,
        "memory": memory,
    }
    if resume is not None:  # only the options given: the run refuses those that differ from its own
        options = {name: value for name, value in options.items() if _given(ctx, name)}
    try:
        config = RunConfig(
            **options,
            max_turns=max_turns,
            max_cost=max_cost,
            max_seconds=max_time,
            resume=resume,
        )
    except ValidationError as e:
        wrong = e.errors()[0]
        if wrong["loc"][0] == "memory":
            raise typer.BadParameter(
                f"{memory[:80]!r} is not a namespace: 1-100 letters, digits, '_', '.', ':' or "
                "'-', starting with a letter or digit",
                param_hint="--memory",
            ) from None
        field = str(wrong["loc"][0])
        option = {"max_seconds": "--max-time"}.get(field, f"--{field.replace('_', '-')}")
        said = str(wrong["msg"])
        if field == "model":  # (pydantic says the pattern itself)
            said = model_name_problem(model) or said
        raise typer.BadParameter(said, param_hint=option) from None
    if resume is not None and runs > 1:
        raise typer.BadParameter("a resume plays the one run it names", param_hint="--runs")
    settings = RunnerSettings()
    if queue:
        if resume is not None:
            raise typer.BadParameter(
                "a queued run starts afresh; a stopped queued run goes back to the queue by itself",
                param_hint="--resume",
            )
        _enqueue(config, settings, runs, as_json)
        return
    if resume is None:
        try:
            ensure_game(game, settings)
        except GameError as e:
            err.print(f"[red]error:[/red] {escape(str(e))}")
            raise typer.Exit(1) from None
    live = runs == 1 and not as_json and sys.stdout.isatty()

    async def one(index: int, limiter: anyio.CapacityLimiter, results: list, ledger: Any) -> None:
        async with limiter:
            if live:
                with LiveView(out) as view:
                    results[index] = await play(
                        config, settings, on_turn=view.on_turn, handle_signals=True, ledger=ledger
                    )
            else:
                results[index] = await play(config, settings, handle_signals=runs == 1, ledger=ledger)
            if not live and not as_json:
                r = results[index]
                err.print(
                    f"run {r.run_id}: {r.reason}, score {score_text(r.score, r.max_score)} in {r.turns} turns",
                    markup=False,
                )

    async def main() -> list:
        results: list = [None] * runs
        limiter = anyio.CapacityLimiter(parallel)
        ledger = await _ledger(size=2 * parallel + 2)
        try:
            async with anyio.create_task_group() as tg:
                for i in range(runs):
                    tg.start_soon(one, i, limiter, results, ledger)
        finally:
            if ledger is not None:
                await ledger.aclose()
        return results

    failures: list[BaseException] = []
    try:
        results = anyio.run(main)
    except* (
        PlayerError,
        ResumeError,
        RunNotFoundError,
        RunFinishedError,
        RunBusyError,
        GameError,
        EngineError,
    ) as group:
        failures = list(group.exceptions)  # raised out here: Python before 3.11.4 wraps what except* raises in a group
    if failures:
        for failure in failures:
            err.print(f"[red]error:[/red] {escape(str(failure))}")
        raise typer.Exit(1)
    if as_json:
        dumped = [r.model_dump() for r in results]
        out.print_json(json.dumps(dumped[0] if runs == 1 else dumped))
    else:
        out.print(summary_table(results))
        for r in results:
            out.print(f"transcript: {r.transcript}", markup=False)
    if memory is not None:  # its memory is in the embedded Postgres, unless FROBOZZ_DATABASE_URL names another
        say_postgres_stays(err)
    stopped = [r.run_id for r in results if r.reason == "interrupted"]
    if stopped:  # a Ctrl-C (or SIGTERM): what was played is kept, and says how to go on
        for run_id in stopped:
            err.print(f"stopped; everything played is saved: go on with `frobozz play --resume {run_id}`", markup=False)
        raise typer.Exit(130)
    if any(r.status == "failed" for r in results):  # (its reason is in the summary)
        raise typer.Exit(1)


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the option (or GAME) was said on the command line, not left at its default."""
    source = ctx.get_parameter_source(name)  # (by its name: typer's click may not be the `click` importable here)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


async def _ledger(size: int) -> Any:
    """The runs' tables, when a database is configured (FROBOZZ_DATABASE_URL), so that `frobozz runs` and the
    leaderboard have the runs played here too; none otherwise (plain play needs no database)."""
    from frobozz.memory import MemorySettings, MemoryStoreError
    from frobozz.runner import RunLedger

    if MemorySettings().database_url is None:
        return None
    try:
        return await RunLedger.open(size=size)
    except MemoryStoreError as e:
        err.print(f"[yellow]warning:[/yellow] the runs are not recorded in the database: {escape(str(e))}")
        return None


def _enqueue(config, settings, runs: int, as_json: bool) -> None:
    """Put `runs` runs of `config` in the queue; their ids, at once."""
    from frobozz.memory import MemoryStoreError, stop_embedded_at_exit
    from frobozz.runner import PlayerError, PlayerSpec, RunLedger, check_prompt_file, commands_for, enqueue

    try:
        if config.prompt_file is not None:
            check_prompt_file(config.prompt_file)  # (a worker would fail each run)
        player = PlayerSpec.parse(config.player)
        ensure_game(config.game, settings)
        if player.kind != "claude":  # a scripted player's commands are checked now, not on a worker later
            commands_for(player, GameLibrary(settings).find(config.game, allow_path=True))
    except (GameError, PlayerError) as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None
    stop_embedded_at_exit()  # a Postgres this starts goes with it (the runs are in it; workers start it again)

    async def main() -> list[str]:
        ledger = await RunLedger.open()
        try:
            return await enqueue(ledger, config, settings, runs)
        finally:
            await ledger.aclose()

    try:
        ids = anyio.run(main)
    except MemoryStoreError as e:
        err.print(f"[red]error:[/red] --queue: {escape(str(e))}")
        raise typer.Exit(1) from None
    if as_json:
        out.print_json(json.dumps(ids))
    else:
        for run_id in ids:
            out.print(run_id)
        err.print(
            f"queued {len(ids)} run(s) of {config.game}: `frobozz worker` plays them, `frobozz runs` lists them",
            markup=False,
        )
