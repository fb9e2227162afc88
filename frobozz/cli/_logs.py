"""How a command's log records reach stderr: a flood is said once.

With the database gone, each turn of a chat logged the same seven warnings again, and asyncpg logged a
25-line traceback each time its pool failed to reconnect: 200 lines over three turns, with the replies lost
among them. Here a line repeated word for word (from one logger, at one level) is shown at most once a
minute; the next time it is shown it says how many were held back, and at the exit one line counts the
rest. Another library's traceback is cut to its last line unless it passes through Frobozz's own code. At
DEBUG both are off: whoever asked for that level wants all of it.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

REPEAT_WINDOW = 60.0  # seconds in which a line is shown once
_OURS = str(Path(__file__).resolve().parents[1])  # frobozz's own files: a traceback through them is kept whole


def _debugging() -> bool:
    return logging.getLogger().isEnabledFor(logging.DEBUG)


class HeldRepeats(logging.Filter):
    """Shows a line once per `window` seconds; the next one shown counts those held back meanwhile."""

    def __init__(self, window: float = REPEAT_WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()  # (a handler's filters run outside its lock, from any thread)
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # key -> (when shown, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        if _debugging():
            return True
        key = (record.name, record.levelno, record.getMessage())
        now = self._clock()
        with self._lock:
            shown = self._seen.get(key)
            if shown is not None and now - shown[0] < self._window:
                self._seen[key] = (shown[0], shown[1] + 1)
                return False
            self._seen[key] = (now, 0)
            if len(self._seen) > 1000:  # a service's lines, most never repeated: forget those past their window
                self._seen = {k: v for k, v in self._seen.items() if v[1] or now - v[0] < self._window}
        if shown is not None and shown[1]:
            record.msg, record.args = f"{record.getMessage()} ({shown[1]} more like this held back)", ()
        return True

    def held(self) -> list[tuple[str, int, str, int]]:
        """(logger, level, line, how many) of the lines held back since they were last shown."""
        with self._lock:
            return [(name, level, line, n) for (name, level, line), (_, n) in self._seen.items() if n]


class ForeignTracebacks(logging.Filter):
    """Another library's traceback as its last line (the exception's type and message), unless Frobozz's code
    is in it: a bug of ours that the MCP SDK or asyncio reports keeps its stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info or record.exc_info[1] is None or record.name.startswith("frobozz") or _debugging():
            return True
        error = record.exc_info[1]
        if any(frame.filename.startswith(_OURS) for frame in traceback.extract_tb(error.__traceback__)):
            return True
        record.msg, record.args = f"{record.getMessage()}: {type(error).__name__}: {error}", ()
        record.exc_info, record.exc_text = None, None
        return True


def quiet_floods(handler: logging.Handler) -> logging.Handler:
    """`handler` with both filters on it, and at the exit a line for each line still held back."""
    repeats = HeldRepeats()
    handler.addFilter(ForeignTracebacks())
    handler.addFilter(repeats)

    def say_held() -> None:  # (registered after logging's own: runs before its shutdown closes the handler)
        held = repeats.held()
        if held:
            said = "%d repeats of %d lines shown above were held back (--log-level DEBUG shows every one)"
            counts = (sum(n for *_, n in held), len(held))
            handler.handle(logging.LogRecord("frobozz", logging.WARNING, "", 0, said, counts, None))

    atexit.register(say_held)
    return handler
