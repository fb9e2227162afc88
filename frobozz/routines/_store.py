"""Routines and their firings in Postgres, and the engine's `Deliveries` protocol over the firings: an
item is delivered when its firing has ended (done, skipped or failed), not when it was first seen."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import asyncpg

from frobozz.memory import MemorySettings, close_pool, migrated_pool

from ._spec import NAME, Routine
from .exceptions import RoutineInputError, RoutineNotFoundError

ENDED = ("done", "skipped", "failed")
FIRST_READ = "first-read"  # the key of the firing that records a feed's first read (no entry's: they are hashes)
STATES = ("queued", "running", *ENDED)
BY_HAND = "run:"  # the key of a firing by hand (`routine run`) begins so (a due time's is a date, an item's a hash)
DIED_BY_HAND = (
    "abandoned: the `routine run` that fired it by hand stopped mid-firing (killed, or its machine went down); "
    "it ended when it was last seen alive"
)


def _named(name: str) -> str:
    """`name`, or RoutineNotFoundError for one no routine has: Postgres refuses some (bytes not UTF-8)."""
    if not re.fullmatch(NAME, name):
        raise _missing(name)
    return name


def _missing(name: str) -> RoutineNotFoundError:
    return RoutineNotFoundError(f"no routine {name[:80]!r} (`frobozz routine list` shows them)")


class RoutineStore:
    """The routines tables over a pool of the database at FROBOZZ_DATABASE_URL (or the embedded one)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, settings: MemorySettings | None = None, *, size: int = 4) -> RoutineStore:
        return cls(await migrated_pool(settings or MemorySettings(), __package__, "routines_migrations", size=size))

    async def aclose(self) -> None:
        await close_pool(self.pool)

    # -- routines ---------------------------------------------------------------------------------
    async def add(self, spec: Routine) -> None:
        done = await self.pool.execute(
            "INSERT INTO routines (name, spec) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            spec.name,
            spec.model_dump_json(),
        )
        if done.endswith(" 0"):
            raise RoutineInputError(f"there is a routine {spec.name} already: remove it first, or pick another name")

    async def get(self, name: str) -> dict[str, Any]:
        row = await self.pool.fetchrow("SELECT * FROM routines WHERE name = $1", _named(name))
        if row is None:
            raise _missing(name)
        return self._routine(row)

    @staticmethod
    def _routine(row: asyncpg.Record) -> dict[str, Any]:
        found = dict(row)
        found["spec"] = Routine.model_validate_json(found["spec"], context={"stored": True})
        return found

    async def routine(self, name: str) -> dict[str, Any]:
        """One routine as `routines` gives each (its firings counted, its last firing's start)."""
        found = await self.routines(name=name)
        if not found:
            raise _missing(name)
        return found[0]

    async def routines(self, *, active: bool = False, name: str | None = None) -> list[dict[str, Any]]:
        """Every routine (or the one named), by name, with its firings counted by state and when the last one
        that fired started (one skipped or missed never fired)."""
        rows = await self.pool.fetch(
            "SELECT r.*, (SELECT json_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM routine_firings f "
            "WHERE f.routine = r.name GROUP BY state) s) AS counts, "
            f"(SELECT max(started) FROM routine_firings f WHERE f.routine = r.name AND f.key <> '{FIRST_READ}') "
            "AS last_fired "
            "FROM routines r WHERE NOT ($1 AND r.paused) AND ($2::text IS NULL OR r.name = $2) ORDER BY r.name",
            active,
            None if name is None else _named(name),
        )
        found = []
        for row in rows:
            item = self._routine(row)
            item["counts"] = json.loads(item["counts"]) if item["counts"] else {}
            found.append(item)
        return found

    async def set_paused(self, name: str, paused: bool) -> None:
        """`updated` is when it was last paused or resumed (a resumed schedule fires from its next due time after
        it), and each pause is kept from its start to its end (`pauses`): pausing a paused routine or resuming an
        active one leaves it as it was."""
        async with self.pool.acquire() as c, c.transaction():
            was = await c.fetchval("SELECT paused FROM routines WHERE name = $1 FOR UPDATE", _named(name))
            if was is None:
                raise _missing(name)
            if was == paused:
                return
            await c.execute("UPDATE routines SET paused = $2, updated = now() WHERE name = $1", name, paused)
            if paused:
                await c.execute(
                    "INSERT INTO routine_pauses (routine, paused) VALUES ($1, now()) ON CONFLICT DO NOTHING", name
                )
            else:
                await c.execute(
                    "UPDATE routine_pauses SET resumed = now() WHERE routine = $1 AND resumed IS NULL", name
                )

    async def pauses(self, name: str, after: datetime) -> list[tuple[datetime, datetime]]:
        """The routine's pauses that it was resumed from after `after`, as (paused, resumed), oldest first."""
        rows = await self.pool.fetch(
            "SELECT paused, resumed FROM routine_pauses WHERE routine = $1 AND resumed > $2 ORDER BY paused",
            name,
            after,
        )
        return [(r["paused"], r["resumed"]) for r in rows]

    async def set_problem(self, name: str, problem: str | None) -> None:
        await self.pool.execute(
            "UPDATE routines SET problem = $2 WHERE name = $1 AND problem IS DISTINCT FROM $2",
            name,
            None if problem is None else problem[:500],
        )

    async def remove(self, name: str) -> None:
        done = await self.pool.execute("DELETE FROM routines WHERE name = $1", _named(name))
        if done.endswith(" 0"):
            raise _missing(name)

    # -- firings ----------------------------------------------------------------------------------
    async def claim(
        self,
        name: str,
        key: str,
        title: str,
        *,
        due: datetime | None = None,
        item: dict[str, Any] | None = None,
        state: str = "queued",
        reason: str | None = None,
    ) -> bool:
        """A new firing, unless this key of this routine has one already (another worker was first)."""
        row = await self.pool.fetchval(
            "INSERT INTO routine_firings (routine, key, title, due, state, reason, item, ended) "
            "VALUES ($1, $2, $3, COALESCE($4, now()), $5, $6, $7, CASE WHEN $5 IN ('done', 'skipped', 'failed') "
            "THEN now() END) ON CONFLICT DO NOTHING RETURNING 1",
            name,
            key,
            title[:500],
            due,
            state,
            reason,
            None if item is None else json.dumps(item),
        )
        return row is not None

    async def first_read(self, name: str, archive: list[tuple[str, str]], reason: str) -> bool:
        """Whether this is the first read of the routine's feed by any worker (recorded as a skipped firing, so
        that no other worker, nor this one restarted, takes a later read for it); if so, the (key, title) of
        `archive` are recorded as skipped, for `reason`, with it, in one transaction."""
        async with self.pool.acquire() as c, c.transaction():
            first = await c.fetchval(
                "INSERT INTO routine_firings (routine, key, title, due, state, reason, ended) "
                "VALUES ($1, $2, 'the feed read for the first time', now(), 'skipped', $3, now()) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                name,
                FIRST_READ,
                f"undated entries in it then, taken for its archive: {len(archive)}",
            )
            if first is not None:
                await c.executemany(
                    "INSERT INTO routine_firings (routine, key, title, due, state, reason, ended) "
                    "VALUES ($1, $2, $3, now(), 'skipped', $4, now()) ON CONFLICT DO NOTHING",
                    [(name, key, title[:500], reason) for key, title in archive],
                )
            return first is not None

    async def firing(self, name: str, key: str) -> dict[str, Any] | None:
        row = await self.pool.fetchrow("SELECT * FROM routine_firings WHERE routine = $1 AND key = $2", name, key)
        if row is None:
            return None
        found = dict(row)
        found["item"] = json.loads(found["item"]) if found["item"] else None
        return found

    async def firings(self, name: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The newest firings first."""
        rows = await self.pool.fetch(
            "SELECT routine, key, title, due, state, reason, run_id, cost_usd, attempts, created, started, ended, "
            "worker FROM routine_firings WHERE routine = $1 ORDER BY created DESC, key DESC LIMIT $2",
            name,
            limit,
        )
        return [dict(r) for r in rows]

    async def open_firings(self, name: str) -> int:
        return await self.pool.fetchval(
            "SELECT count(*) FROM routine_firings WHERE routine = $1 AND state IN ('queued', 'running')", name
        )

    async def last_due(self, name: str) -> datetime | None:
        return await self.pool.fetchval(
            "SELECT max(due) FROM routine_firings WHERE routine = $1 AND key LIKE '20%'", name
        )

    async def running_at(self, name: str, key: str, moment: datetime) -> bool:
        """Whether another firing of the routine was running at `moment`: in its current attempt, or in an earlier
        one, from its start until its worker was last seen. A firing taken up again after its worker died was
        started anew then: while its worker was dead it was not running."""
        return await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM routine_firings WHERE routine = $1 AND key <> $2 AND started <= $3 "
            "AND (state = 'running' OR ended > $3)) "
            "OR EXISTS (SELECT 1 FROM routine_attempts WHERE routine = $1 AND key <> $2 AND started <= $3 "
            "AND alive >= $3)",
            name,
            key,
            moment,
        )

    async def start(self, name: str, key: str, run_id: str | None) -> None:
        """The firing's attempt starts now, in this process (`worker`: "host:pid"). One that was running (its worker
        died mid-firing: it is taken up again) is kept as an earlier attempt, from its start until its worker was
        last seen (`alive`)."""
        async with self.pool.acquire() as c, c.transaction():
            await c.execute(
                "INSERT INTO routine_attempts (routine, key, started, alive) "
                "SELECT routine, key, started, GREATEST(started, alive) FROM routine_firings "
                "WHERE routine = $1 AND key = $2 AND state = 'running' AND started IS NOT NULL "
                "ON CONFLICT DO NOTHING",
                name,
                key,
            )
            await c.execute(
                "UPDATE routine_firings SET state = 'running', attempts = attempts + 1, started = now(), "
                "alive = NULL, run_id = COALESCE($3, run_id), worker = $4 WHERE routine = $1 AND key = $2",
                name,
                key,
                run_id,
                f"{socket.gethostname()}:{os.getpid()}",  # (as the runner names its workers)
            )

    async def alive(self, name: str, key: str) -> None:
        """The worker running the firing is alive now (marked every few seconds while it runs)."""
        await self.pool.execute(
            "UPDATE routine_firings SET alive = now() WHERE routine = $1 AND key = $2 AND state = 'running'",
            name,
            key,
        )

    async def end_dead_by_hand(self, stale: float) -> list[dict[str, Any]]:
        """End the firings by hand (`routine run`) whose process was not seen alive for `stale` seconds (it marks
        itself alive every few seconds, as a worker does): failed, abandoned, ended when last seen (a killed
        `routine run` has no queue to give its firing to another; it was left running for ever, and an inbox's
        or feed's next item waited for it). Those ended, with their run ids, for their runs to end too."""
        rows = await self.pool.fetch(
            "UPDATE routine_firings SET state = 'failed', reason = $3, ended = COALESCE(GREATEST(started, alive), "
            "created) WHERE starts_with(key, $1) AND state IN ('queued', 'running') "
            "AND COALESCE(GREATEST(started, alive), created) < now() - make_interval(secs => $2) "
            "RETURNING routine, key, run_id, ended",
            BY_HAND,
            float(stale),
            DIED_BY_HAND,
        )
        return [dict(r) for r in rows]

    async def by_run(self, run_id: str) -> dict[str, Any] | None:
        """The firing whose run is `run_id` (None: no routine's)."""
        row = await self.pool.fetchrow(
            "SELECT routine, key, state, worker FROM routine_firings WHERE run_id = $1 LIMIT 1", run_id
        )
        return None if row is None else dict(row)

    async def finish(
        self,
        name: str,
        key: str,
        state: str,
        reason: str | None = None,
        *,
        cost_usd: float | None = None,
        run_id: str | None = None,
    ) -> None:
        assert state in ENDED
        await self.pool.execute(
            "UPDATE routine_firings SET state = $3, reason = $4, ended = now(), "
            "cost_usd = COALESCE($5, cost_usd), run_id = COALESCE($6, run_id) "
            "WHERE routine = $1 AND key = $2",
            name,
            key,
            state,
            None if reason is None else reason[:500],
            cost_usd,
            run_id,
        )

    # -- the engine's Deliveries protocol (a source is a routine's name) ----------------------------
    async def done(self, source: str, keys: Iterable[str]) -> set[str]:
        rows = await self.pool.fetch(
            "SELECT key FROM routine_firings WHERE routine = $1 AND key = ANY($2::text[]) AND state = ANY($3::text[])",
            source,
            list(keys),
            list(ENDED),
        )
        return {r["key"] for r in rows}

    async def mark_done(self, source: str, key: str) -> None:
        await self.finish(source, key, "done")
