"""How a command's log records reach stderr: a flood is said once.

With the database gone, each turn of a chat logged the same seven warnings again, and asyncpg logged a
25-line traceback each time its pool failed to reconnect: 200 lines over three turns, with the replies lost
among them. Here a message (its template, from one logger, at one level) is shown at most once a minute,
and the next time it is shown it says how many were held back; another library's traceback is cut to its
last line, unless the level is DEBUG (whoever asked for it wants the whole of it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

REPEAT_WINDOW = 60.0  # seconds in which a message is shown once


class HeldRepeats(logging.Filter):
    """Shows a message once per `window` seconds; the next one shown counts those held back meanwhile."""

    def __init__(self, window: float = REPEAT_WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._window = window
        self._clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # key -> (when shown, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        shown = self._seen.get(key)
        if shown is not None and now - shown[0] < self._window:
            self._seen[key] = (shown[0], shown[1] + 1)
            return False
        self._seen[key] = (now, 0)
        if shown is not None and shown[1]:
            record.msg = f"{record.msg} ({shown[1]} more like this held back)"
        return True


class ForeignTracebacks(logging.Filter):
    """Another library's traceback as its last line: the exception's type and message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and not record.name.startswith("frobozz"):
            if not logging.getLogger().isEnabledFor(logging.DEBUG):
                error = record.exc_info[1]
                record.msg = f"{record.msg}: {type(error).__name__}: {error}"
                record.exc_info, record.exc_text = None, None
        return True


def quiet_floods(handler: logging.Handler) -> logging.Handler:
    """`handler` with both filters on it."""
    handler.addFilter(ForeignTracebacks())
    handler.addFilter(HeldRepeats())
    return handler
