"""`frobozz routine`: sessions nobody starts by hand, fired by `frobozz worker` (or now, by `routine run`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from ._output import cell, err

out = Console()
T = TypeVar("T")
MAX_PROMPT = 100_000  # characters, as a routine's prompt holds (given inline or in a file alike)
MAX_PROMPT_BYTES = 4 * MAX_PROMPT  # UTF-8 spends up to 4 bytes a character: 100,000 bytes refused 60,000 'é'

routine_app = typer.Typer(
    help="Routines: a prompt at cron times, every N seconds, on new mail or on new feed "
    "entries, each firing a session with memory recorded as a run.",
    no_args_is_help=True,
)


def _with_store(work: Callable[[Any, Any], Awaitable[T]]) -> T:
    """Open the routines' and runs' database, run `work(store, ledger)`, close; errors plainly."""
    from frobozz.memory import MemoryStoreError, stop_embedded_at_exit
    from frobozz.routines import RoutineError, RoutineStore
    from frobozz.runner import RunLedger

    stop_embedded_at_exit()

    async def main() -> T:
        store = await RoutineStore.open()
        ledger = await RunLedger.open(size=4)
        try:
            return await work(store, ledger)
        finally:
            await ledger.aclose()
            await store.aclose()

    try:
        return anyio.run(main)
    except (MemoryStoreError, RoutineError) as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(1) from None


def _prompt(prompt: str | None, prompt_file: Path | None) -> str:
    if (prompt is None) == (prompt_file is None):
        raise typer.BadParameter("give the prompt with --prompt TEXT or --prompt-file FILE (one of them)")
    if prompt_file is None:
        return prompt or ""
    too_large = typer.BadParameter(f"{prompt_file} is over {MAX_PROMPT} characters", param_hint="--prompt-file")
    try:
        if prompt_file.stat().st_size > MAX_PROMPT_BYTES:
            raise too_large
        with prompt_file.open("rb") as f:  # at most the limit and a byte: a pipe or a device has no size to check
            data = f.read(MAX_PROMPT_BYTES + 1)
        if len(data) > MAX_PROMPT_BYTES:
            raise too_large
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text reads it
        if len(text) > MAX_PROMPT:
            raise too_large
        return text
    except (OSError, UnicodeDecodeError) as e:
        raise typer.BadParameter(f"{prompt_file} cannot be read: {e}", param_hint="--prompt-file") from None


@routine_app.command("add")
def add(
    name: str,
    cron: str = typer.Option(None, help="5 cron fields (minute hour day month weekday) or @hourly, @daily…"),
    tz: str = typer.Option(None, help="The time zone of --cron (an IANA name, such as Europe/Lisbon; default: UTC)."),
    every: float = typer.Option(None, help="Fire every this many seconds."),
    inbox: str = typer.Option(
        None, help="imaps://user@host[:port]/FOLDER: fire on each new mail (plain imap:// on loopback only)."
    ),
    feed: str = typer.Option(None, help="An RSS or Atom feed's URL: fire on each new entry."),
    poll: float = typer.Option(None, help="Seconds between looks at the inbox or feed (default: 60)."),
    prompt: str = typer.Option(None, help="What the model is to do."),
    prompt_file: Path = typer.Option(None, help="The prompt, from a file."),
    namespace: str = typer.Option("", help="The memory namespace (default: routine-NAME)."),
    workspace: str = typer.Option(None, help="The folder claude works in (default: one of the routine's own)."),
    model: str = typer.Option(None, help="claude's model for each firing (default: claude's own)."),
    max_turns: int = typer.Option(None, help="Model turns per firing."),
    max_cost: float = typer.Option(None, help="Dollars per firing."),
    max_seconds: float = typer.Option(None, help="Seconds per firing."),
    game: str = typer.Option(None, help="Each firing is a game run with memory (Solitude with a game)."),
    password_env: str = typer.Option(
        None,
        help="The environment variable with the mailbox's password "
        "(default FROBOZZ_IMAP_PASSWORD), read by each worker.",
    ),
    password_file: str = typer.Option(None, help="A file with the mailbox's password, read by each worker."),
) -> None:
    """Add a routine (kept in the database; every `frobozz worker` on it fires it)."""
    from frobozz.routines import RoutineInputError, routine

    sources = {"cron": cron, "every": every, "inbox": inbox, "feed": feed}
    given = [k for k, v in sources.items() if v is not None]
    if len(given) != 1:
        raise typer.BadParameter("give exactly one of --cron, --every, --inbox, --feed")
    kind = given[0]
    if password_env is not None and password_file is not None:  # (both were stored, and which one won unsaid)
        raise typer.BadParameter(
            "give the mailbox's password with --password-env NAME or --password-file FILE (one of them)"
        )
    if game is not None:
        from frobozz.games import GameError, GameLibrary, GamesSettings

        try:
            GameLibrary(GamesSettings()).find(game, allow_path=True)
        except GameError as e:
            raise typer.BadParameter(str(e), param_hint="--game") from None
    values: dict[str, Any] = dict(
        name=name,
        kind=kind,
        prompt=_prompt(prompt, prompt_file),
        namespace=namespace,
        model=model,
        max_turns=max_turns,
        max_cost=max_cost,
        max_seconds=max_seconds,
        game=game,
        password_env=password_env,
        password_file=str(Path(password_file).resolve()) if password_file and password_file.strip() else password_file,
        workspace=str(Path(workspace).resolve()) if workspace and workspace.strip() else workspace,
    )
    values |= {option: value for option, value in (("tz", tz), ("poll", poll)) if value is not None}  # given only
    if kind == "cron":
        values["cron"] = cron
    elif kind == "every":
        values["every"] = every
    else:
        values["url"] = sources[kind]
    try:
        spec = routine(**values)
    except RoutineInputError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    _with_store(lambda store, ledger: store.add(spec))
    out.print(f"routine {spec.name}: {escape(spec.describe())}; `frobozz worker` fires it")


async def _ended_dead(store: Any, ledger: Any) -> None:
    """First, the firings by hand whose `routine run` died mid-firing are ended (as a worker's look ends them),
    so that what is listed is not one left running for ever."""
    from frobozz.routines import RoutineSettings, end_dead_by_hand

    await end_dead_by_hand(store, ledger, RoutineSettings())


async def _listed(store: Any, r: dict[str, Any]) -> dict[str, Any]:
    """A routine as `list` and `show` give it: with its next firing (a schedule's due time, as the web view's)."""
    from frobozz.routines import next_firing

    due, words = await next_firing(store, r)
    return {**_row(r), "next_due": due, "next": words}


def _row(r: dict[str, Any]) -> dict[str, Any]:
    spec = r["spec"]
    return {
        "name": r["name"],
        "when": spec.describe(),
        "paused": r["paused"],
        "problem": r.get("problem"),
        "firings": r.get("counts", {}),
        "last_fired": r.get("last_fired"),
        "spec": {**spec.model_dump(), "namespace": spec.namespace_or_default},  # the one it uses ("": routine-NAME)
        "created": r["created"],
    }


@routine_app.command("list")
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every routine: when it fires, whether it is paused, its firings by state."""

    async def work(store: Any, ledger: Any) -> list[dict[str, Any]]:
        await _ended_dead(store, ledger)
        return [await _listed(store, r) for r in await store.routines()]

    rows = _with_store(work)
    if as_json:
        out.print_json(json.dumps(rows, default=str))
        return
    if not rows:
        out.print("no routines yet: `frobozz routine add NAME --cron '30 7 * * *' --prompt ...` adds one")
        return
    # "when" folds: a feed's or an inbox's URL whole (cut to `http://127.0.…`, two feeds of one host looked
    # alike), and under the trigger, the next firing
    table = Table("routine", Column("when", overflow="fold", ratio=3), "state", "firings", "last fired")
    for r in rows:
        state = "paused" if r["paused"] else ("problem: " + r["problem"] if r["problem"] else "active")
        counts = ", ".join(f"{n} {s}" for s, n in sorted(r["firings"].items())) or "-"
        last = _moment(r["last_fired"]) if r["last_fired"] else "-"
        when = Text.assemble(cell(r["when"]), ("\nnext: " + r["next"], "dim") if r["next"] else "")
        table.add_row(r["name"], when, cell(state), counts, last)
    out.print(table)


@routine_app.command("show")
def show(
    name: str, as_json: bool = typer.Option(False, "--json"), limit: int = typer.Option(50, min=1, max=10000)
) -> None:
    """One routine and its firings (due time or item, state, run, cost), newest first."""

    async def work(store: Any, ledger: Any) -> dict[str, Any]:
        await _ended_dead(store, ledger)
        row = await _listed(store, await store.routine(name))  # (as `list` gives it: its counts, last firing too)
        row["firings_list"] = await store.firings(name, limit=limit)
        return row

    row = _with_store(work)
    if as_json:
        out.print_json(json.dumps(row, default=str))
        return
    out.print(Text.assemble((row["name"], "bold"), ": ", cell(row["when"]), " (paused)" if row["paused"] else ""))
    if row["next"]:
        out.print(Text.assemble(("next firing:", "dim"), " ", row["next"]))
    out.print(Text.assemble(("memory namespace:", "dim"), " ", row["spec"]["namespace"]))
    if row["problem"]:  # (a server's words: a mail server's, a feed's)
        out.print(Text.assemble(("at the last look:", "yellow"), " ", cell(row["problem"])))
    if not row["firings_list"]:
        out.print("no firings yet")
        return
    # At 80 columns six columns cut the due time and the run id: the firing's text (its title, the reason,
    # when it ran) is one column that folds; the state, the run id (what `runs show` takes) and the cost are
    # never cut.
    table = Table(
        Column("firing", overflow="fold"),
        Column("state", no_wrap=True),
        Column("run", no_wrap=True, min_width=22),
        Column("cost", no_wrap=True),
        show_lines=True,  # a firing's text is lines: each firing's own, set apart
    )
    for f in row["firings_list"]:
        table.add_row(
            Text.assemble(
                cell(f["title"]),  # a mail's subject, a feed item's title: outside text
                ("\n" + cell(f["reason"]).plain, "italic") if f["reason"] else "",  # (plain text: no markup read)
                ("\n" + _ran(f), "dim"),
            ),
            f["state"],
            f["run_id"] or "",
            f"${f['cost_usd']:.4f}",
        )
    out.print(table)


def _ran(firing: dict[str, Any]) -> str:
    """When a firing ran: 'started …, ended …' ('running since …'); one that never started (skipped, missed,
    or still queued) says when it was recorded. (It said 'at' the time it was queued: a due time's firing read
    'due 18:28:30 / finished / at 18:28:27'.)"""
    if firing["started"] is None:
        return f"{'queued' if firing['state'] == 'queued' else 'recorded'} {_moment(firing['created'])}"
    if firing["state"] in ("queued", "running"):
        return f"running since {_moment(firing['started'])}"
    return f"started {_moment(firing['started'])}\nended {_moment(firing['ended'])}"


def _moment(value: object) -> str:
    """A recorded time to the second, in UTC: '2026-11-30 07:29:58 UTC' (28 characters with 'at ')."""
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        return moment.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if value.tzinfo else "")
    return str(value)


@routine_app.command("pause")
def pause(name: str) -> None:
    """Stop firing it (firings already running end as they would)."""
    _with_store(lambda store, ledger: store.set_paused(name, True))
    out.print(f"routine {name}: paused")


@routine_app.command("resume")
def resume(name: str) -> None:
    """Fire it again from its next due time or item."""
    _with_store(lambda store, ledger: store.set_paused(name, False))
    out.print(f"routine {name}: active")


@routine_app.command("remove")
def remove(name: str) -> None:
    """Remove it and its firings' records (its runs stay in `frobozz runs`)."""
    _with_store(lambda store, ledger: store.remove(name))
    out.print(f"routine {name}: removed")


@routine_app.command("run")
def run(name: str) -> None:
    """Fire it once, now, here (its prompt alone; a paused routine too), recorded as its firings are."""
    import secrets

    from frobozz.memory import MemoryService, MemorySettings
    from frobozz.routines import BY_HAND, Firer, RoutineSettings

    async def work(store: Any, ledger: Any) -> dict[str, Any] | None:
        await store.get(name)
        key = f"{BY_HAND}{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"
        await store.claim(name, key, "run by hand")
        memory = MemoryService(MemorySettings())
        try:
            await Firer(store, ledger, memory, RoutineSettings())({"routine": name, "key": key, "manual": True})
        finally:
            await memory.aclose()
        return await store.firing(name, key)

    firing = _with_store(work)
    assert firing is not None
    out.print(
        f"routine {name}: {firing['state']}"
        + (f" ({escape(firing['reason'])})" if firing["reason"] else "")
        + f", run {firing['run_id'] or '-'}, ${firing['cost_usd']:.4f}"
    )
    if firing["state"] == "failed":
        raise typer.Exit(1)
