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
    assert held.held() == []
    first = record("recall: %s failed (%s)", "search", "gone")
    assert held.filter(first) and first.getMessage() == "recall: search failed (gone)" and held.held() == []


def test_a_line_repeated_within_the_window_is_held_back_and_counted_when_it_is_next_shown():
    clock = Clock()
    held = HeldRepeats(window=60, clock=clock)
    assert held.filter(record("recall: %s failed (%s)", "search", "gone"))
    clock.now = 10
    assert not held.filter(record("recall: %s failed (%s)", "search", "gone"))
    assert not held.filter(record("recall: search failed (gone)"))  # the same words, however they were made
    assert held.held() == [("frobozz.memory", logging.WARNING, "recall: search failed (gone)", 2)]
    clock.now = 61
    later = record("recall: %s failed (%s)", "search", "gone")
    assert held.filter(later) and later.getMessage() == "recall: search failed (gone) (2 more like this held back)"
    assert held.held() == []
    clock.now = 200
    quiet = record("recall: %s failed (%s)", "search", "gone")
    assert held.filter(quiet) and quiet.getMessage() == "recall: search failed (gone)"


def test_lines_that_differ_in_any_word_logger_or_level_are_each_shown():
    held = HeldRepeats(window=60, clock=Clock())
    assert held.filter(record("run %s failed", "run-1", level=logging.ERROR))
    assert held.filter(record("run %s failed", "run-2", level=logging.ERROR))  # one template, two runs
    assert held.filter(record("run %s failed", "run-2", name="frobozz.runner", level=logging.ERROR))
    assert held.filter(record("run %s failed", "run-2", name="frobozz.runner", level=logging.WARNING))


def test_at_debug_level_nothing_is_held_back_or_cut():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        held = HeldRepeats(window=60, clock=Clock())
        assert held.filter(record("the same")) and held.filter(record("the same"))
        foreign = record("Failed to restore the pool connection floor", name="asyncpg.pool", error=raised())
        assert ForeignTracebacks().filter(foreign) and foreign.exc_info is not None
    finally:
        root.setLevel(level)


def raised(text: str = "Connection refused") -> ConnectionRefusedError:
    try:
        raise ConnectionRefusedError(111, text)
    except ConnectionRefusedError as e:
        return e


def raised_in_frobozz() -> Exception:
    from frobozz.cli._app import bare_values

    try:
        bare_values(None)  # type: ignore[arg-type]  # a TypeError inside Frobozz's own code
    except TypeError as e:
        return e
    raise AssertionError("bare_values(None) raised nothing")


def test_another_librarys_traceback_is_its_last_line_and_ours_is_kept_whole():
    foreign = record("Failed to restore the pool connection floor; retrying", name="asyncpg.pool", error=raised())
    assert ForeignTracebacks().filter(foreign)
    assert foreign.exc_info is None
    assert foreign.getMessage() == (
        "Failed to restore the pool connection floor; retrying: ConnectionRefusedError: [Errno 111] Connection refused"
    )
    ours = record("the worker crashed", name="frobozz.routines", error=raised())
    assert ForeignTracebacks().filter(ours) and ours.exc_info is not None and ours.getMessage() == "the worker crashed"
    through_ours = record("handler for %r raised", "act", name="mcp.server", error=raised_in_frobozz())
    assert ForeignTracebacks().filter(through_ours) and through_ours.exc_info is not None  # a bug of ours: whole


def test_an_error_whose_text_looks_like_a_format_is_kept_as_text():
    foreign = record("query %s failed", "q1", name="asyncpg.pool", error=raised("100% of %s and %d"))
    assert ForeignTracebacks().filter(foreign)
    assert foreign.getMessage() == "query q1 failed: ConnectionRefusedError: [Errno 111] 100% of %s and %d"
