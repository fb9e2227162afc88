"""Routines: sessions nobody starts by hand. A prompt at cron times or every N seconds, on each new mail
in an IMAP mailbox or each new entry of a feed; each firing a memory-loop session recorded as a run,
fired once by whichever worker (`frobozz worker`) takes it from the run queue's database."""

from ._fire import Fired, fire
from ._next import next_firing
from ._spec import PASSWORD_ENV, Routine, password, producer, readable, routine, seconds
from ._store import BY_HAND, ENDED, STATES, RoutineStore
from ._worker import ENTRYPOINT, Firer, RoutineWorker, end_dead_by_hand, enqueue, next_due
from .exceptions import RoutineError, RoutineInputError, RoutineNotFoundError
from .settings import RoutineSettings

__all__ = [
    "BY_HAND",
    "ENDED",
    "ENTRYPOINT",
    "PASSWORD_ENV",
    "STATES",
    "Fired",
    "Firer",
    "Routine",
    "RoutineError",
    "RoutineInputError",
    "RoutineNotFoundError",
    "RoutineSettings",
    "RoutineStore",
    "RoutineWorker",
    "end_dead_by_hand",
    "enqueue",
    "fire",
    "next_due",
    "next_firing",
    "password",
    "producer",
    "readable",
    "routine",
    "seconds",
]
