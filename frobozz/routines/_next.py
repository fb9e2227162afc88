"""A routine's next firing in words, as `routine list` and the web view's Routines page give it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ._spec import seconds
from ._store import RoutineStore
from ._worker import next_due
from .exceptions import RoutineError


async def next_firing(store: RoutineStore, row: dict[str, Any]) -> tuple[datetime | None, str]:
    """(the next due time: a schedule's, else None; it in words) for a routine as `RoutineStore.routines`
    gives it: 'none while paused', 'due now' (past: the next look fires it), '2026-11-30 07:30:00 UTC', or for
    an inbox or a feed, which fire on what comes, how often they are looked at."""
    spec = row["spec"]
    if row["paused"]:
        return None, "none while paused"
    if spec.kind == "inbox":
        return None, f"on new mail (looks at least every {seconds(spec.poll)})"
    if spec.kind == "feed":
        return None, f"on a new entry (looks every {seconds(spec.poll)})"
    try:
        due = await next_due(store, row)
    except RoutineError as e:
        return None, f"unknown: {e}"
    if due is None:
        return None, ""
    return due, "due now" if due <= datetime.now(UTC) else f"{due.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
