"""The live terminal view of a run (rich): latest game text, score, moves, location, turn, cost."""

from __future__ import annotations

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ._context import RunContext
from ._store import TurnRecord


class LiveView:
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
        status.add_row(f"[bold]{info.title}[/bold]", f"score [cyan]{score}[/cyan]", f"moves {record.moves}",
                       f"turn {record.turn}{budget}", f"cost ${info.cost_usd:.4f}")
        lines = record.text.strip().splitlines()[-14:]
        body = Group(status, Text(f"> {record.command}", style="bold green"), Text("\n".join(lines)))
        self._live.update(Panel(body, title=record.location or "", subtitle=f"run {info.run_id}"))


def summary_table(results: list) -> Table:
    memory = any(r.memory_namespace for r in results)
    table = Table("run", "player", "mode", "score", "moves", "turns", "won", "reason", "cost",
                  *(["memory", "recalled", "stored", "compactions", "handoffs"] if memory else []),
                  title="Frobozz runs")
    for r in results:
        score = f"{r.score}/{r.max_score}" if r.max_score else str(r.score)
        noted = [r.memory_namespace or "-", *map(str, (r.memories_recalled, r.memories_stored, r.compactions,
                                                        r.handoffs))] if memory else []
        table.add_row(r.run_id, r.player, r.mode, score, str(r.moves), str(r.turns), "yes" if r.won else "no",
                      r.reason or "", f"${r.cost_usd:.4f}", *noted)
    return table
