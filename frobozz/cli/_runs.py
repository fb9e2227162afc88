"""`frobozz worker`, `frobozz runs` and `frobozz leaderboard`: queued runs, played and looked back on."""

from __future__ import annotations

import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import typer
from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from frobozz._text import printable, printable_lines

from ._database import say_postgres_stays
from ._output import cell, err
from ._trace import start_tracing, trace_option

out = Console()
T = TypeVar("T")


def _no_worker(row: dict[str, Any]) -> str:
    """What `runs show` says of a run no queue worker took: a finished run played by `play` or a routine's firing
    was "(not taken yet)" too; a routine's firing, which a worker fired, "played where it was started"."""
    firing = row.get("firing")
    if firing is not None:
        where = f" on {firing['worker']}" if firing["worker"] else ""
        if firing["by_hand"]:
            return f"none: fired by hand (`routine run {firing['routine']}`){where}"
        worker = firing["worker"] or "a routine worker (which one was not kept)"
        return f"{worker}, firing routine {firing['routine']}"
    if not row["in_database"]:
        return "played here, not in the database"
    return "(not taken yet)" if row["status"] == "queued" else "none: played where it was started, not queued"


async def _firing(run_id: str) -> dict[str, Any] | None:
    """The routine firing that made the run (None: no routine's), on the runs' database."""
    from frobozz.routines import BY_HAND, RoutineStore

    store = await RoutineStore.open(size=1)
    try:
        found = await store.by_run(run_id)
    finally:
        await store.aclose()
    if found is None:
        return None
    return {**found, "by_hand": found["key"].startswith(BY_HAND)}


def _with_ledger(work: Callable[[Any], Awaitable[T]], *, one_shot: bool = True, size: int = 4) -> T:
    """Open the runs' database (FROBOZZ_DATABASE_URL, or the embedded one), run `work`, close; errors plainly."""
    from frobozz.memory import MemoryStoreError, stop_embedded_at_exit
    from frobozz.runner import RunLedger, RunNotFoundError

    if one_shot:
        stop_embedded_at_exit()  # a Postgres this command starts goes with it

    async def main() -> T:
        ledger = await RunLedger.open(size=size)
        try:
            return await work(ledger)
        finally:
            await ledger.aclose()

    try:
        return anyio.run(main)
    except (MemoryStoreError, RunNotFoundError) as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None


def worker(
    concurrency: int = typer.Option(1, min=1, max=16, help="How many runs at once."),
    games: str = typer.Option(None, help="Comma-separated games this worker takes (default: every game it has)."),
    trace: bool = trace_option(),
) -> None:
    """Take queued runs (`play --queue`) and play them, until Ctrl-C or SIGTERM: the runs in hand then stop
    at their next turn and go back to the queue, to be taken up from there."""
    start_tracing(trace, "frobozz-worker")
    from frobozz.games import GameError
    from frobozz.runner import RunnerSettings, Worker, score_text, serve_in_process
    from frobozz.servers import load_server

    serve_in_process(load_server)  # runs' game, cortex and handoff servers in this process (routines' games too)
    settings = RunnerSettings()
    names = [g.strip() for g in games.split(",") if g.strip()] if games else None
    if games is not None and not names:
        raise typer.BadParameter("name at least one game", param_hint="--games")

    def finished(result: Any) -> None:
        score = score_text(result.score, result.max_score)
        out.print(f"run {result.run_id}: {result.reason}, score {score} in {result.turns} turns", markup=False)

    async def work(ledger: Any) -> None:
        from frobozz.routines import RoutineSettings, RoutineStore, RoutineWorker

        taker: Worker | None = None
        try:
            taker = Worker(ledger, settings, concurrency=concurrency, games=names, on_finished=finished)
        except GameError as e:
            if names:  # games asked for by name and not here: refused
                err.print(f"[red]error:[/red] {escape(str(e))}")
                raise typer.Exit(1) from None
            err.print(
                f"worker: {escape(str(e))}; queued game runs are left to a worker that has their game, and a --game "
                "routine's firing fails here, saying so"
            )  # routines without a game need none
        store = await RoutineStore.open(size=4)
        routines = RoutineWorker(store, ledger, RoutineSettings())  # the routines on this database fire here too
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_on_signal, *filter(None, (taker, routines)))
                if taker is None:
                    err.print("worker: firing routines")
                    await routines.run()
                else:
                    err.print(
                        f"worker: taking runs of {len(taker.stories)} game(s), {concurrency} at a time, "
                        "and firing routines"
                    )
                    async with anyio.create_task_group() as both:
                        both.start_soon(routines.run)
                        await taker.run()
                        routines.stop()
                tg.cancel_scope.cancel()
        finally:
            await routines.memory.aclose()
            await store.aclose()
        played = len(taker.played) if taker else 0
        err.print(f"worker: stopped after {played} run(s) and {len(routines.fired)} routine firing(s)")
        say_postgres_stays(err, "worker")  # the queue's database, left for the next worker

    _with_ledger(work, one_shot=False, size=2 * concurrency + 12)  # per run: its lock, its turns; and firings


async def _stop_on_signal(*takers: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            err.print("worker: stopping; the runs in hand stop at their next turn and go back to the queue")
            for taker in takers:
                taker.stop()
            return


runs = typer.Typer(
    help="Runs in the database (queued and played by workers): list them, or show one.", invoke_without_command=True
)


@runs.callback()
def runs_list(
    ctx: typer.Context,
    game: str = typer.Option(None),
    model: str = typer.Option(None),
    status: str = typer.Option(
        None,
        help="queued, running, finished, stopped or failed (or, with --json, damaged: a run folder here whose "
        "run.json cannot be read).",
    ),
    limit: int = typer.Option(50, min=1, max=10000),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The newest runs first."""
    from frobozz.runner import STATUSES

    if ctx.invoked_subcommand is not None:
        return
    if status is not None and status not in (*STATUSES, DAMAGED):
        raise typer.BadParameter(f"use one of: {', '.join((*STATUSES, DAMAGED))}", param_hint="--status")
    from frobozz.runner import RunnerSettings, all_runs, damaged_runs, with_damaged

    here = RunnerSettings().runs_dir  # runs played on this machine count too, in the database or not
    rows = _with_ledger(lambda ledger: all_runs(ledger, here, game=game, model=model, status=status, limit=limit))
    damaged = damaged_runs(here)  # (read once: listed with --json, and said on stderr)
    if as_json:
        if game is None and model is None and status in (None, DAMAGED):  # (a damaged run's game is not known)
            rows = with_damaged(rows, damaged, limit=limit)
        out.print_json(json.dumps(rows, default=str))
        _say_damaged(here, damaged, listed=True)
        return
    if not rows:
        out.print(
            "no runs" + (" matching" if game or model or status else " yet: `frobozz play GAME --queue` queues some")
        )
    else:
        out.print(_RunsTable(rows))
    _say_damaged(here, damaged)


DAMAGED = "damaged"  # `runs --json`'s status of a run folder here whose run.json cannot be read


def _say_damaged(runs_dir: Path, damaged: list[Any], *, listed: bool = False) -> None:
    """The run folders here whose run.json cannot be read (damaged_runs), said once (on stderr): they were left out
    without a word, and `runs show` said there was no such run (`listed`: `runs --json` lists them, status
    damaged)."""
    if not damaged:
        return
    ids = ", ".join(d.run_id for d in damaged[:5]) + (f" and {len(damaged) - 5} more" if len(damaged) > 5 else "")
    how = 'listed with status "damaged"' if listed else "so they are not listed"
    err.print(
        f"[yellow]warning:[/yellow] {len(damaged)} run folder(s) in {escape(str(runs_dir))} cannot be read (their "
        f"run.json is damaged), {how}: {escape(ids)}; `frobozz runs show ID` says why"
    )


def _say_damage(runs_dir: Path, run_id: str) -> None:
    """A damaged file in the run's folder here that what is shown passes over (its snapshot.json: `runs show`
    ended in a traceback), said on stderr, naming it."""
    from frobozz.runner import RunNotFoundError, RunStore

    try:
        damage = RunStore.open(runs_dir, run_id).damage()
    except RunNotFoundError:  # (not here, or its run.json damaged: said already)
        return
    if damage is not None:
        err.print(
            f"[yellow]warning:[/yellow] {escape(str(damage))}: its turns are shown from turns.jsonl, and it cannot "
            "be resumed in text mode"
        )


class _RunsTable:
    """The runs as a table that fits the width it is drawn at: status, score, turns and cost are never cut (at 80
    columns and at 40 alike); what was played (game, mode, player, model) and why it ended fold in one column; the
    run id (what `runs show` takes) has a column of its own, whole, where it fits beside them (it does at 80), and
    heads the folding column where it does not (at 80 the cost was cut to "cos", at 40 the status to "fi…")."""

    TAIL = ("status", "score", "turns", "cost")
    PLAYED_AT_LEAST = 12  # the folding column's width below which the run id goes into it

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        from frobozz.runner import score_text

        self.rows = [
            (
                r["run_id"],
                Text.assemble(
                    cell(f"{r['game']} ({r['mode']}), {r['player']}" + (f" ({r['model']})" if r["model"] else "")),
                    ("\n" + cell(r["reason"]).plain, "italic") if r["reason"] else "",
                ),
                (r["status"], score_text(r["score"], r["max_score"]), str(r["turns"]), f"${r['cost_usd']:.4f}"),
            )
            for r in rows
        ]

    def table(self, width: int) -> Table:
        tails = [max(len(name), *(len(row[2][i]) for row in self.rows)) for i, name in enumerate(self.TAIL)]
        run_width = max(len("run"), *(len(row[0]) for row in self.rows))
        # columns two apart (a divider and one space of padding), none at the edges
        apart = run_width + sum(tails) + 2 * (len(tails) + 1) + self.PLAYED_AT_LEAST <= width
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), show_lines=True)
        if apart:
            table.add_column("run", no_wrap=True, min_width=run_width)
        table.add_column("played, and why it ended" if apart else "run, played", overflow="fold")
        for name, tail in zip(self.TAIL, tails, strict=True):
            table.add_column(name, no_wrap=True, width=tail, justify="left" if name == "status" else "right")
        for run_id, played, tail_cells in self.rows:
            if apart:
                table.add_row(run_id, played, *tail_cells)
            else:
                table.add_row(Text.assemble(run_id, "\n", played), *tail_cells)
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)


@runs.command("show")
def runs_show(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """One run: its settings and result, where it was played, its score chart and map."""
    from frobozz.runner import RunnerSettings, RunStore, run_row, score_text

    here = RunnerSettings().runs_dir

    async def work(ledger: Any) -> dict[str, Any]:
        row = await run_row(ledger, here, run_id.strip())
        row["info"] = json.loads(row["info"])
        row.pop("snapshot", None)
        row["firing"] = await _firing(row["run_id"]) if row["in_database"] and not row["worker"] else None
        if row["mode"] == "routine":
            row["won"] = None  # a routine's firing is no game: neither won nor lost
        turns = (
            await ledger.turns(row["run_id"])
            if row["in_database"]
            else RunStore.open(here, row["run_id"]).turns(repair=False)
        )
        row["last_turn"] = (
            None if not turns else {"turn": turns[-1].turn, "command": turns[-1].command, "text": turns[-1].text}
        )
        where = Path(row["run_dir"]) if row["run_dir"] else None
        row["files"] = {
            name: str(where / name)
            for name in ("transcript.md", "score.png", "map.png")
            if where is not None and (where / name).exists()
        }
        return row

    row = _with_ledger(work)
    _say_damage(here, row["run_id"])
    if as_json:
        out.print_json(json.dumps(row, default=str))
        return
    info = row["info"]
    table = Table.grid(padding=(0, 2))
    score = score_text(row["score"], row["max_score"])
    for name, value in (
        ("run", row["run_id"]),
        ("game", f"{row['game']} ({info.get('title')})"),
        ("player", row["player"]),
        ("mode", row["mode"]),
        ("model", row["model"] or "(default)"),
        ("status", f"{row['status']}" + (f": {row['reason']}" if row["reason"] else "")),
        ("score", score),
        ("turns", row["turns"]),
        ("won", "n/a (a routine's firing, not a game)" if row["won"] is None else "yes" if row["won"] else "no"),
        ("cost", f"${row['cost_usd']:.4f}"),
        ("worker", row["worker"] or _no_worker(row)),
        ("run directory", row["run_dir"] or "-"),
        ("queued", row["queued_at"]),
        ("started", row["started_at"]),
        ("ended", row["ended_at"]),
    ):
        table.add_row(f"[bold]{name}[/bold]", cell("-" if value is None else value))
    for name, path in row["files"].items():
        table.add_row(f"[bold]{name}[/bold]", cell(path))
    if row["run_dir"] and not row["files"]:
        if Path(row["run_dir"]).is_dir():  # (a run played here: "on the worker's machine (None)" it said)
            said = "none yet (no transcript, score chart or map) in its run directory, on this machine"
        else:
            said = f"on the worker's machine ({row['worker'] or 'not known'}), not this one"
        table.add_row("[bold]files[/bold]", cell(said))
    out.print(table)
    if row["last_turn"]:
        last = row["last_turn"]
        command, text = escape(printable(last["command"])), escape(printable_lines(last["text"].strip()))
        out.print(f"\n[bold]turn {last['turn']}[/bold]: > {command}\n{text}")


def leaderboard(game: str = typer.Option(None), as_json: bool = typer.Option(False, "--json")) -> None:
    """One row per (model, player, game, mode) over the runs that ended: runs, mean and best score, wins,
    mean turns to the end, cost per point."""
    from frobozz.runner import RunnerSettings, score_text
    from frobozz.runner import leaderboard as board

    here = RunnerSettings().runs_dir  # runs played on this machine count too, in the database or not
    rows = _with_ledger(lambda ledger: board(ledger, here, game=game))
    if as_json:
        out.print_json(json.dumps(rows))
        return
    if not rows:
        out.print("no finished runs" + (f" of {game}" if game else "") + " yet")
        return
    # Fits 80 columns: what was played (model, player, game, mode) folds in one column; the numbers are never cut
    # (ten columns at 80 were "(def… walk… 15/3…")
    table = Table(title="Frobozz leaderboard", box=box.SIMPLE_HEAD, pad_edge=False, show_lines=True)
    table.add_column("played", overflow="fold", min_width=16)
    for name in ("runs", "mean score", "best", "wins", "mean turns", "cost/point"):
        table.add_column(name, no_wrap=True, justify="right")
    for r in rows:
        played = cell(f"{r['model'] or '(default)'}, {r['player']}, {r['game']} ({r['mode']})")
        best = score_text(r["best_score"], r["max_score"])
        per_point = "-" if r["cost_per_point"] is None else f"${r['cost_per_point']:.4f}"
        table.add_row(
            played,
            str(r["runs"]),
            f"{r['mean_score']:.1f}",
            best,
            str(r["wins"]),
            f"{r['mean_turns']:.1f}",
            per_point,
        )
    out.print(table)
