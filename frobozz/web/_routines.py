"""Where the web view reads routines: the routines' store in Postgres (routines live only there), each routine
with its trigger, its next firing and its last firings. Only reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frobozz.routines import RoutineStore, next_firing

from ._lazy_store import LazyStore
from .settings import WebSettings

LAST = 5  # firings shown per routine


@dataclass(frozen=True)
class RoutineRow:
    name: str
    trigger: str
    state: str  # active, paused, or what went wrong at the last look
    next: str  # the next firing, as words
    counts: dict[str, int]
    firings: list[dict[str, Any]]  # the newest first


class Routines:
    """The routines' store, opened at the first look (routines live only in the database)."""

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self._store = LazyStore(
            lambda: RoutineStore.open(settings, size=2),
            what="the routines' database",
            without="routines live only there",
        )

    @property
    def database_error(self) -> str | None:
        return self._store.database_error

    async def aclose(self) -> None:
        await self._store.aclose()

    async def rows(self) -> list[RoutineRow]:
        """Every routine, by name (none without a database: `database_error` says why)."""

        async def read(store: RoutineStore) -> list[RoutineRow]:
            return [await _row(store, r) for r in await store.routines()]

        return await self._store.use(read) or []


async def _row(store: RoutineStore, row: dict[str, Any]) -> RoutineRow:
    spec = row["spec"]
    state = "paused" if row["paused"] else (f"problem: {row['problem']}" if row.get("problem") else "active")
    return RoutineRow(
        name=row["name"],
        trigger=spec.describe(),
        state=state,
        next=(await next_firing(store, row))[1],
        counts=row.get("counts") or {},
        firings=await store.firings(row["name"], limit=LAST),
    )
