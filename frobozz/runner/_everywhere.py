"""Runs played here and runs in the database, counted together: `frobozz runs`, `runs show`, the leaderboard
and the web view all see a run that never reached the database (played with none configured, or while it
was away) as they see the others. Only reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._ledger import RunLedger
from ._store import RunDamagedError, RunInfo, RunNotFoundError, RunStore


def local_infos(runs_dir: Path, *, only: str | None = None) -> list[RunInfo]:
    """Every run directory on this machine (what is not a run, or is one being made, is passed over, and so is
    a damaged one: see damaged_runs), as it stands (RunStore.as_it_stands); `only`: that run's, if it is here."""
    if not runs_dir.is_dir():
        return []
    infos = []
    for path in [runs_dir / only] if only else runs_dir.iterdir():
        try:
            infos.append(RunStore.open(runs_dir, path.name).as_it_stands())
        except RunNotFoundError:
            continue
    return infos


def damaged_runs(runs_dir: Path) -> list[RunDamagedError]:
    """The run directories on this machine whose run.json cannot be read (local_infos passes them over): each
    says which run, where and why, so that no run drops out of sight without a word."""
    if not runs_dir.is_dir():
        return []
    damaged = []
    for path in sorted(runs_dir.iterdir()):
        try:
            RunStore.open(runs_dir, path.name)
        except RunDamagedError as e:
            damaged.append(e)
        except RunNotFoundError:
            continue
    return damaged


def damaged_row(damaged: RunDamagedError) -> dict[str, Any]:
    """A damaged run folder (damaged_runs) as the runs table lists a run, for those that read the list as data
    (`runs --json` left it out): its run id, folder and when it was made (from its id), status "damaged", the
    reason what is wrong and where; what its run.json would have said (game, score…) None."""
    return {
        **dict.fromkeys(ROW_FIELDS),
        "run_id": damaged.run_id,
        "status": "damaged",
        "reason": str(damaged),
        "run_dir": str(damaged.path.parent),
        "created": _made(damaged.run_id),
    }


def _made(run_id: str) -> datetime | None:
    try:
        return datetime.strptime(run_id[:15], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _killed_here(info: RunInfo, row: dict[str, Any]) -> bool:
    """Whether a run the database says is running ended on this machine, where it was played by hand: killed,
    or failed or finished without the database hearing of it (a worker's run killed here may have been taken up
    by another worker: the database's row says how it is)."""
    return info.status not in ("running", "queued") and row.get("status") == "running" and not row.get("worker")


ROW_FIELDS = (  # a row of the runs table (RunLedger.runs), as `runs --json` gives each run
    "run_id",
    "game",
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
    "worker",
    "run_dir",
    "created",
    "updated",
)


def local_row(info: RunInfo, runs_dir: Path) -> dict[str, Any]:
    """A run of this machine as the runs table lists one."""
    created = datetime.fromisoformat(info.created) if info.created else None
    return {
        "run_id": info.run_id,
        "game": info.game,
        "player": info.player,
        "mode": info.mode,
        "model": info.model,
        "status": info.status,
        "reason": info.reason,
        "score": info.score,
        "max_score": info.max_score,
        "turns": info.turns,
        "won": info.won,
        "cost_usd": info.cost_usd,
        "worker": None,
        "run_dir": str(runs_dir / info.run_id),
        "created": created,
        "updated": None,
    }


async def all_runs(
    ledger: RunLedger | None,
    runs_dir: Path,
    *,
    game: str | None = None,
    model: str | None = None,
    status: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The newest runs first, from the database and from this machine (the database's row wins)."""
    found = {
        r["run_id"]: r
        for r in (await ledger.runs(game=game, model=model, status=status, limit=limit) if ledger is not None else [])
    }
    wanted = {"game": game, "model": model, "status": status}
    for info in local_infos(runs_dir):
        row = local_row(info, runs_dir)
        if all(v is None or row[k] == v for k, v in wanted.items()):
            if info.run_id not in found or _killed_here(info, found[info.run_id]):
                found[info.run_id] = row
    rows = sorted(found.values(), key=lambda r: (_when(r["created"]), r["run_id"]), reverse=True)
    return rows[:limit]


def with_damaged(
    rows: list[dict[str, Any]], damaged_here: list[RunDamagedError], *, limit: int
) -> list[dict[str, Any]]:
    """`rows` (all_runs'), with each run folder here whose run.json cannot be read (damaged_runs) as a row of its
    own (damaged_row), newest first, at most `limit`: `runs --json` left them out, said only on stderr. One the
    database lists is listed as it has it."""
    listed = {r["run_id"] for r in rows}
    damaged = [damaged_row(d) for d in damaged_here if d.run_id not in listed]
    if not damaged:
        return rows
    return sorted([*rows, *damaged], key=lambda r: (_when(r["created"]), r["run_id"]), reverse=True)[:limit]


async def run_row(ledger: RunLedger | None, runs_dir: Path, run_id: str) -> dict[str, Any]:
    """One run as `runs show` gives it: the database's row, else this machine's run directory (`in_database`
    says which)."""
    missing: RunNotFoundError | None = None
    if ledger is not None:
        try:
            row = await ledger.get(run_id)
        except RunNotFoundError as e:
            missing = e
        else:
            here = local_infos(runs_dir, only=run_id)
            if here and _killed_here(here[0], row):
                row.update(status=here[0].status, reason=here[0].reason, turns=here[0].turns)
            return {**row, "in_database": True}
    try:
        store = RunStore.open(runs_dir, run_id)
    except RunDamagedError:
        raise  # (here, and damaged: said so, with where, not "no run")
    except RunNotFoundError:
        if missing is None:
            raise
        raise RunNotFoundError(f"{missing}, nor on this machine") from None
    info = store.as_it_stands()
    return {
        **local_row(info, runs_dir),
        "info": json.dumps(asdict(info)),
        "queued_at": None,
        "started_at": _at(info.created),  # (a run played here starts as it is made)
        "ended_at": _ended(store, info),
        "in_database": False,
    }


def _ended(store: RunStore, info: RunInfo) -> datetime | None:
    """When a run of this machine ended, from its own record: when it was said to end, else (a run killed, or
    one from before runs kept it) its last turn's time; None while it plays."""
    if info.status in ("running", "queued"):
        return None
    if info.ended:
        return _at(info.ended)
    last = store.last_turn()
    return _at(last.at) if last is not None else None


def _at(when: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(when) if when else None
    except ValueError:
        return None


async def leaderboard(ledger: RunLedger | None, runs_dir: Path, *, game: str | None = None) -> list[dict[str, Any]]:
    """The leaderboard over the runs that ended (status finished: won, died, or a budget reached), in the
    database and on this machine."""
    ended = await ledger.ended(game=game) if ledger is not None else []
    mine = [i for i in local_infos(runs_dir) if i.status == "finished" and (game is None or i.game == game)]
    known = await ledger.known([i.run_id for i in mine]) if ledger is not None else set()
    ended += [local_row(i, runs_dir) for i in mine if i.run_id not in known]
    return board(ended)


def board(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, player, game, mode): runs, mean and best score, wins, mean turns to the end, cost
    per point; best first."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"] or "", r["player"], r["game"], r["mode"]), []).append(r)
    out = []
    for (model, player, game, mode), runs in groups.items():
        scores = [r["score"] or 0 for r in runs]
        cost = sum(r["cost_usd"] or 0.0 for r in runs)
        maxima = [r["max_score"] for r in runs if r["max_score"] is not None]
        out.append(
            {
                "model": model,
                "player": player,
                "game": game,
                "mode": mode,
                "runs": len(runs),
                "mean_score": round(sum(scores) / len(runs), 2),
                "best_score": max(scores),
                "max_score": max(maxima) if maxima else None,
                "wins": sum(bool(r["won"]) for r in runs),
                "mean_turns": round(sum(r["turns"] for r in runs) / len(runs), 1),
                "cost_usd": round(cost, 6),
                "cost_per_point": round(cost / sum(scores), 6) if sum(scores) > 0 else None,
            }
        )
    return sorted(
        out,
        key=lambda b: (-b["mean_score"], -b["wins"], b["mean_turns"], b["model"], b["player"], b["game"], b["mode"]),
    )


def _when(created: Any) -> str:
    return created.isoformat() if isinstance(created, datetime) else str(created or "")
