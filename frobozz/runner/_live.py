"""The live terminal view of a run (rich): latest game text, score, moves, location, turn, cost."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from frobozz._text import printable, printable_lines

from ._context import RunContext
from ._report import score_text
from ._store import TurnRecord


class LiveView:
    """The terminal's live view of a run as it plays (rich's Live), used as a context manager."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live = Live(console=console, refresh_per_second=8, transient=False)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.__exit__(None, None, None)

    def on_turn(self, context: RunContext, record: TurnRecord) -> None:
        info = context.info
        status = Table.grid(padding=(0, 2))
        score = f"{record.score}/{context.max_score}" if context.max_score else str(record.score)
        budget = f"/{info.max_turns}" if info.max_turns else ""
        status.add_row(
            Text(printable(info.title), style="bold"),  # a story file's name: no markup
            f"score [cyan]{score}[/cyan]",
            f"moves {record.moves}",
            f"turn {record.turn}{budget}",
            f"cost ${info.cost_usd:.4f}",
        )
        lines = record.text.strip().splitlines()[-14:]
        said = Text(printable_lines("\n".join(lines)))  # the game's words: no ESC codes
        body = Group(status, Text(f"> {printable(record.command)}", style="bold green"), said)
        self._live.update(Panel(body, title=Text(printable(record.location or "")), subtitle=f"run {info.run_id}"))


def summary_table(results: list) -> Group:
    """One row per run, and a second table of what memory did when it played with memory. The run id is
    never cut or wrapped (it is what `--resume` takes); the rest fits 80 columns, as when the output is piped."""
    table = Table(title="Frobozz runs", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("run", no_wrap=True, min_width=22)
    table.add_column("player", min_width=11, overflow="fold")
    for name in ("score", "turns"):
        table.add_column(name, no_wrap=True, justify="right")
    table.add_column("reason", min_width=12, overflow="fold")  # "won" when it was won
    table.add_column("cost", no_wrap=True, justify="right")
    for r in results:
        score = score_text(r.score, r.max_score)
        player, reason = Text(printable(f"{r.player} ({r.mode})")), Text(printable(r.reason or ""))  # as they are
        table.add_row(r.run_id, player, score, str(r.turns), reason, f"${r.cost_usd:.4f}")
    remembered = [r for r in results if r.memory_namespace]
    if not remembered:
        return Group(table)
    memory = Table(title="Memory", box=box.SIMPLE_HEAD, pad_edge=False)
    memory.add_column("run", no_wrap=True, min_width=22)
    memory.add_column("namespace", min_width=9, overflow="fold")
    for name in ("recalled", "stored", "compacted", "hand-offs"):
        memory.add_column(name, no_wrap=True, justify="right")
    for r in remembered:
        memory.add_row(
            r.run_id, r.memory_namespace, *map(str, (r.memories_recalled, r.memories_stored, r.compactions, r.handoffs))
        )
    return Group(table, memory)
