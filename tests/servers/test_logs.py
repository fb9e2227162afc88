"""The `frobozz` loggers go down to what a request asked for only while it is in flight."""

import io
import logging

import pytest

from frobozz.servers._logs import _Lowered


@pytest.fixture
def loggers(monkeypatch):
    """A fresh process's logging: the root at warning with one stderr handler, the `frobozz` loggers unset."""
    stream, root, ours = io.StringIO(), logging.getLogger(), logging.getLogger("frobozz")
    monkeypatch.setattr(root, "handlers", [logging.StreamHandler(stream)])
    monkeypatch.setattr(root, "level", logging.WARNING)
    monkeypatch.setattr(ours, "level", logging.NOTSET)
    return ours, stream


def test_with_no_request_in_flight_the_loggers_keep_their_own_level(loggers):
    ours, _ = loggers
    lowered = _Lowered()
    with lowered.down_to("warning"), lowered.down_to("error"):  # what they make already: nothing changes
        assert ours.level == logging.NOTSET
    assert ours.level == logging.NOTSET


def test_the_lowest_level_in_flight_holds_and_the_own_level_comes_back_with_the_last(loggers):
    ours, stream = loggers
    lowered = _Lowered()
    debug, info = lowered.down_to("debug"), lowered.down_to("info")
    with info:
        assert ours.getEffectiveLevel() == logging.INFO
        with debug:
            assert ours.getEffectiveLevel() == logging.DEBUG
            logging.getLogger("frobozz.servers").debug("for the client only")
        assert ours.getEffectiveLevel() == logging.INFO  # the debug request ended: info still in flight
    assert ours.level == logging.NOTSET  # as it was: a later log.debug makes no record
    assert not ours.isEnabledFor(logging.INFO)
    logging.getLogger("frobozz.servers").warning("shown")
    assert stream.getvalue() == "shown\n"  # stderr never showed the lines made for the client


def test_a_request_that_fails_still_puts_the_level_back(loggers):
    ours, _ = loggers
    lowered = _Lowered()
    with pytest.raises(RuntimeError), lowered.down_to("debug"):
        raise RuntimeError("the tool failed")
    assert ours.level == logging.NOTSET
