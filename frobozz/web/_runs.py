"""Where the web view reads runs: the run directories on this machine, and the runs table in Postgres
(runs queued and played by workers anywhere), merged by run id. Only reads: a page beside a live run
never writes to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from frobozz.runner import RunInfo, RunLedger, RunNotFoundError, RunStore, TurnRecord, leaderboard, local_infos
from frobozz.tracing import run_spans, session_spans

from ._lazy_store import LazyStore
from .settings import WebSettings

LIVE = ("queued", "running")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    game: str
    title: str
    player: str
    model: str | None
    mode: str
    status: str
    reason: str | None
    score: int | None
    max_score: int | None
    turns: int
    won: bool
    cost_usd: float
    created: str  # ISO time, UTC

    @classmethod
    def of(cls, info: RunInfo) -> RunRow:
        return cls(
            info.run_id,
            info.game,
            info.title,
            info.player,
            info.model,
            info.mode,
            info.status,
            info.reason,
            info.score,
            info.max_score,
            info.turns,
            info.won,
            info.cost_usd,
            info.created,
        )


@dataclass(frozen=True)
class RunView:
    """A run as its page shows it: its state, and the turns committed so far."""

    info: RunInfo
    turns: list[TurnRecord]

    @property
    def live(self) -> bool:
        return self.info.status in LIVE


class Runs:
    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self._ledger = LazyStore(
            lambda: RunLedger.open(settings, size=2),
            what="the runs database",
            without="only the runs played on this machine are shown",
        )
        self._from_ledger = self._ledger.use  # work(ledger), or None without a database right now

    @property
    def database_error(self) -> str | None:
        return self._ledger.database_error

    async def aclose(self) -> None:
        await self._ledger.aclose()

    # -- the runs table --------------------------------------------------------------------------
    async def rows(self, **wanted: str | None) -> list[RunRow]:
        """Runs here and in the database, newest first, those matching every filter given (game, model, mode,
        player, status); at most `web_page_size`."""
        wanted = {k: v for k, v in wanted.items() if v}
        found = {info.run_id: RunRow.of(info) for info in self._local_infos()}
        limit = self.settings.web_page_size
        query = {k: wanted.get(k) for k in ("game", "model", "status")}  # what the runs table filters itself
        there = None  # (a value holding a NUL matches nothing there: no text in Postgres holds one)
        if not any(_holds_nul(v) for v in wanted.values()):
            there = await self._from_ledger(lambda ledger: ledger.runs(**query, limit=limit))
        for row in there or []:
            mine = found.get(row["run_id"])
            killed_here = mine is not None and (mine.status, mine.reason) == ("stopped", "killed")
            if mine is None or (killed_here and row.get("worker")):  # a worker's run killed here may have
                found[row["run_id"]] = _row(row)  # been taken up elsewhere: the database knows
        rows = [r for r in found.values() if all(getattr(r, k) == v for k, v in wanted.items())]
        return sorted(rows, key=lambda r: (r.created, r.run_id), reverse=True)[:limit]

    async def leaderboard(self) -> list[dict[str, Any]] | None:
        """The leaderboard of the runs that ended, in the database and on this machine; None without a
        database."""
        return await self._from_ledger(lambda ledger: leaderboard(ledger, self.settings.runs_dir))

    def _local_infos(self) -> list[RunInfo]:
        return local_infos(self.settings.runs_dir)

    # -- one run ---------------------------------------------------------------------------------
    async def run(self, run_id: str, *, after: int = 0) -> RunView:
        """The run and its turns after `after`: from its directory here, else from the database."""
        try:
            store = RunStore.open(self.settings.runs_dir, run_id)
        except RunNotFoundError:  # played elsewhere, or not at all: the database knows
            if _holds_nul(run_id):  # no run id does (Postgres would refuse it)
                raise
            found = await self._from_ledger(lambda ledger: _ledger_view(ledger, run_id, after))
            if found is None:
                raise
            return found
        return RunView(store.as_it_stands(), [t for t in store.turns(repair=False) if t.turn > after])

    async def spans(self, run_id: str | None = None, *, session_id: str | None = None) -> list[dict[str, Any]]:
        """The spans kept of a run's traces, or a claude session's (none without a database, or none kept)."""

        async def kept(ledger: RunLedger) -> list[dict[str, Any]]:
            async with ledger.pool.acquire() as connection:
                return await (
                    run_spans(connection, run_id) if run_id is not None else session_spans(connection, session_id or "")
                )

        if _holds_nul(run_id) or _holds_nul(session_id):
            return []
        return await self._from_ledger(kept) or []

    async def follow(self, run_id: str, after: int) -> AsyncIterator[RunView]:
        """The run each time it changes (new turns after the last seen, a new state), until it has ended."""
        seen: Any = None
        while True:
            mark = await self._mark(run_id)
            if mark != seen:
                seen = mark
                view = await self.run(run_id, after=after)
                if view.turns:
                    after = view.turns[-1].turn
                yield view
                if not view.live:
                    return
            await anyio.sleep(self.settings.web_poll_seconds)

    async def _mark(self, run_id: str) -> Any:
        """Something that changes whenever the run does: its files' sizes and times, or its row's update time."""
        directory = self.settings.runs_dir / run_id
        if (directory / "run.json").exists():
            return tuple(_stat(directory / name) for name in ("run.json", "turns.jsonl", "snapshot.json"))
        return await self._from_ledger(
            lambda ledger: ledger.pool.fetchval("SELECT updated FROM runs WHERE run_id = $1", run_id)
        )


def _holds_nul(value: str | None) -> bool:
    """Whether `value` has a NUL, which no text in Postgres holds (it refuses the query)."""
    return value is not None and "\0" in value


async def _ledger_view(ledger: RunLedger, run_id: str, after: int) -> RunView:
    return RunView(await ledger.info(run_id), await ledger.turns(run_id, after=after))


def _row(row: dict[str, Any]) -> RunRow:
    created = row.get("created")
    return RunRow(
        row["run_id"],
        row["game"],
        row["game"],
        row["player"],
        row["model"],
        row["mode"],
        row["status"],
        row["reason"],
        row["score"],
        row["max_score"],
        row["turns"],
        row["won"],
        row["cost_usd"],
        created.isoformat(timespec="seconds") if isinstance(created, datetime) else str(created or ""),
    )


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns
