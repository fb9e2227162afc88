"""The routines part's errors: one root."""

from __future__ import annotations


class RoutineError(Exception):
    """Root of every error the routines part raises on purpose."""


class RoutineNotFoundError(RoutineError):
    """No routine of that name."""


class RoutineInputError(RoutineError):
    """A routine's settings that cannot work (bad cron, zone, URL, limits, credentials)."""
