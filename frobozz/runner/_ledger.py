"""Runs, their turns and their results in Postgres: what lets a worker on any machine take a run up
where another left it, and what `frobozz runs` and `frobozz leaderboard` read.

A turn is committed here after the run directory has it (the directory is each machine's own record);
the run's row carries its run.json (`info`) and the game after the last committed turn (`snapshot`), in
one transaction with the turn, so the two never disagree."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import asyncpg

from frobozz.memory import MemorySettings, close_pool, migrated_pool

from ._store import RunInfo, RunNotFoundError, RunStore, TurnRecord

_COLUMNS = (
    "game",
    "story_md5",
    "player",
    "mode",
    "model",
    "status",
    "reason",
    "score",
    "max_score",
    "turns",
    "won",
    "cost_usd",
)
STATUSES = ("queued", "running", "finished", "stopped", "failed")
_KNOWN = {f.name for f in fields(RunInfo)}


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _info(data: str | dict[str, Any]) -> RunInfo:
    data = json.loads(data) if isinstance(data, str) else data
    return RunInfo(**{k: v for k, v in data.items() if k in _KNOWN})


class RunLedger:
    """The runs tables over a pool of the database at FROBOZZ_DATABASE_URL (or the embedded one)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, settings: MemorySettings | None = None, *, size: int = 4) -> RunLedger:
        return cls(await migrated_pool(settings or MemorySettings(), __package__, "runner_migrations", size=size))

    async def aclose(self) -> None:
        await close_pool(self.pool)

    async def add(self, info: RunInfo, *, queued: bool = True) -> None:
        """A new run: waiting for a worker (`queued`), or played here, recorded as it starts (or resumes)."""
        if queued:
            info.status = "queued"
        values = [getattr(info, c) for c in _COLUMNS]
        await self.pool.execute(
            f"INSERT INTO runs (run_id, {', '.join(_COLUMNS)}, info, {'queued_at' if queued else 'started_at'}) "
            f"VALUES ($1, {', '.join(f'${i + 2}' for i in range(len(_COLUMNS)))}, ${len(_COLUMNS) + 2}, now()) "
            "ON CONFLICT (run_id) DO NOTHING",
            info.run_id,
            *values,
            json.dumps(asdict(info)),
        )

    async def save(self, info: RunInfo, **extra: Any) -> None:
        """The run's state as run.json has it (and `extra` columns: worker, run_dir, started_at…)."""
        sets = [f"{c} = ${i + 2}" for i, c in enumerate(_COLUMNS)]
        values: list[Any] = [getattr(info, c) for c in _COLUMNS]
        for name, value in extra.items():
            values.append(value)
            sets.append(f"{name} = ${len(values) + 1}")
        values.append(json.dumps(asdict(info)))
        sets.append(f"info = ${len(values) + 1}")
        done = await self.pool.execute(
            f"UPDATE runs SET {', '.join(sets)}, updated = now() WHERE run_id = $1", info.run_id, *values
        )
        if done.endswith(" 0"):
            raise RunNotFoundError(f"no run {info.run_id} in the database")

    async def record(self, info: RunInfo, turn: TurnRecord, snapshot: dict[str, Any] | None) -> None:
        """Commit one turn with the run's state and the game after it, all or nothing."""
        async with self.pool.acquire() as c, c.transaction():
            await c.execute(
                "INSERT INTO run_turns (run_id, turn, record) VALUES ($1, $2, $3) "
                "ON CONFLICT (run_id, turn) DO UPDATE SET record = EXCLUDED.record",
                info.run_id,
                turn.turn,
                json.dumps(asdict(turn)),
            )
            await c.execute("DELETE FROM run_turns WHERE run_id = $1 AND turn > $2", info.run_id, turn.turn)
            await c.execute(
                f"UPDATE runs SET {', '.join(f'{c_} = ${i + 2}' for i, c_ in enumerate(_COLUMNS))}, "
                f"info = ${len(_COLUMNS) + 2}, snapshot = COALESCE(${len(_COLUMNS) + 3}::jsonb, snapshot), "
                "updated = now() WHERE run_id = $1",
                info.run_id,
                *[getattr(info, c_) for c_ in _COLUMNS],
                json.dumps(asdict(info)),
                None if snapshot is None else json.dumps({"record": asdict(turn), **snapshot}),
            )

    async def get(self, run_id: str) -> dict[str, Any]:
        row = await self.pool.fetchrow("SELECT * FROM runs WHERE run_id = $1", run_id)
        if row is None:
            raise RunNotFoundError(f"no run {run_id[:80]!r} in the database")
        return dict(row)

    async def info(self, run_id: str) -> RunInfo:
        return _info((await self.get(run_id))["info"])

    async def turns(self, run_id: str, *, after: int = 0) -> list[TurnRecord]:
        rows = await self.pool.fetch(
            "SELECT record FROM run_turns WHERE run_id = $1 AND turn > $2 ORDER BY turn", run_id, after
        )
        return [TurnRecord(**json.loads(r["record"])) for r in rows]

    async def runs(
        self, *, game: str | None = None, model: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The newest runs first, each without its turns and snapshot."""
        rows = await self.pool.fetch(
            "SELECT run_id, game, player, mode, model, status, reason, score, max_score, turns, won, cost_usd, "
            "worker, run_dir, created, updated FROM runs WHERE ($1::text IS NULL OR game = $1) "
            "AND ($2::text IS NULL OR model = $2) AND ($3::text IS NULL OR status = $3) "
            "ORDER BY created DESC, run_id DESC LIMIT $4",
            game,
            model,
            status,
            limit,
        )
        return [dict(r) for r in rows]

    async def leaderboard(self, *, game: str | None = None) -> list[dict[str, Any]]:
        """One row per (model, player, game, mode) over the runs that ended: runs, mean and best score,
        wins, mean turns to the end, cost per point."""
        from ._everywhere import board

        return board(await self.ended(game=game))

    async def ended(self, *, game: str | None = None) -> list[dict[str, Any]]:
        """The runs that ended (status finished), with what the leaderboard counts of each."""
        rows = await self.pool.fetch(
            "SELECT run_id, model, player, game, mode, score, max_score, won, turns, cost_usd FROM runs "
            "WHERE status = 'finished' AND ($1::text IS NULL OR game = $1)",
            game,
        )
        return [dict(r) for r in rows]

    async def known(self, run_ids: list[str]) -> set[str]:
        """Which of these runs the database has."""
        rows = await self.pool.fetch("SELECT run_id FROM runs WHERE run_id = ANY($1::text[])", run_ids)
        return {r["run_id"] for r in rows}

    async def checkout(self, run_id: str, runs_dir: Path) -> RunStore:
        """The run's directory on this machine, made to agree with the database (the record of what was
        committed): run.json, turns.jsonl, snapshot.json, and the transcript when there is none here."""
        from . import _report

        row = await self.get(run_id)
        info = _info(row["info"])
        records = await self.turns(run_id)
        directory = runs_dir / run_id
        directory.mkdir(parents=True, exist_ok=True)
        store = RunStore(directory, info)
        store.save_info()
        store.rewrite(records, json.loads(row["snapshot"]) if row["snapshot"] else None)
        if not store.transcript.exists():
            _report.start_transcript(store)
            for record in records:
                _report.append_turn(store, record)
        return store
