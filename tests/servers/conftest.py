"""What the servers' tests share."""

import io
import logging

import pytest


@pytest.fixture
def stderr_handler(monkeypatch) -> io.StringIO:
    """Logging as the CLI sets it up in a fresh process (a root handler that shows what the root's level, warning,
    lets through; the `frobozz` loggers unset), put back after the test. What stderr showed is in the stream."""
    stream = io.StringIO()
    monkeypatch.setattr(logging.getLogger(), "handlers", [logging.StreamHandler(stream)])
    monkeypatch.setattr(logging.getLogger(), "level", logging.WARNING)
    monkeypatch.setattr(logging.getLogger("frobozz"), "level", logging.NOTSET)  # another test may have set it
    return stream
