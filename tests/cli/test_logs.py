"""A command's log lines on stderr: a flood said once, another library's traceback as one line."""

import logging

from frobozz.cli._logs import ForeignTracebacks, HeldRepeats


def record(message: str, *args: object, name: str = "frobozz.memory", level: int = logging.WARNING, error=None):
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    return logging.LogRecord(name, level, __file__, 1, message, args, exc_info)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nothing_logged_holds_nothing_back():
    held = HeldRepeats(window=60, clock=Clock())
    first = record("recall: %s failed (%s)", "search", "gone")
    assert held.filter(first) and first.getMessage() == "recall: search failed (gone)"


def test_a_message_repeated_within_the_window_is_held_back_and_counted_when_it_is_next_shown():
    clock = Clock()
    held = HeldRepeats(window=60, clock=clock)
    assert held.filter(record("recall: %s failed (%s)", "search", "gone"))
    clock.now = 10
    assert not held.filter(record("recall: %s failed (%s)", "search", "gone again"))
    assert not held.filter(record("recall: %s failed (%s)", "with_sidecar", "gone"))
    clock.now = 61
    later = record("recall: %s failed (%s)", "search", "still gone")
    assert held.filter(later)
    assert later.getMessage() == "recall: search failed (still gone) (2 more like this held back)"
    clock.now = 200
    quiet = record("recall: %s failed (%s)", "search", "once more")
    assert held.filter(quiet) and quiet.getMessage() == "recall: search failed (once more)"


def test_other_messages_loggers_and_levels_are_not_held_back_by_one_another():
    held = HeldRepeats(window=60, clock=Clock())
    assert held.filter(record("memory: %s was left out (%s)", "recall", "gone"))
    assert held.filter(record("recall: %s failed (%s)", "search", "gone"))
    assert held.filter(record("recall: %s failed (%s)", "search", "gone", name="frobozz.loop"))
    assert held.filter(record("recall: %s failed (%s)", "search", "gone", level=logging.ERROR))


def error_raised() -> ConnectionRefusedError:
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as e:
        return e


def test_another_librarys_traceback_is_its_last_line_and_ours_is_kept_whole():
    foreign = record("Failed to restore the pool connection floor; retrying", name="asyncpg.pool", error=error_raised())
    assert ForeignTracebacks().filter(foreign)
    assert foreign.exc_info is None
    assert foreign.getMessage() == (
        "Failed to restore the pool connection floor; retrying: ConnectionRefusedError: [Errno 111] Connection refused"
    )
    ours = record("the worker crashed", name="frobozz.routines", error=error_raised())
    assert ForeignTracebacks().filter(ours) and ours.exc_info is not None and ours.getMessage() == "the worker crashed"


def test_at_debug_level_another_librarys_traceback_is_kept_whole():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        foreign = record("Failed to restore the pool connection floor", name="asyncpg.pool", error=error_raised())
        assert ForeignTracebacks().filter(foreign) and foreign.exc_info is not None
    finally:
        root.setLevel(level)
