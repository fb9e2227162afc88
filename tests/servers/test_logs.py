"""The servers' MCP logging: the `frobozz` loggers go down to what a request asked for only while it is in
flight, and a record from a worker thread never stalls the event loop."""

import logging
import subprocess
import sys

import pytest

from frobozz.servers._logs import _Lowered

OURS = logging.getLogger("frobozz")


def test_with_no_request_in_flight_the_loggers_keep_their_own_level(stderr_handler):
    lowered = _Lowered()
    with lowered.down_to("warning"), lowered.down_to("error"):  # what they make already: nothing changes
        assert OURS.level == logging.NOTSET
    assert OURS.level == logging.NOTSET


def test_the_lowest_level_in_flight_holds_and_the_own_level_comes_back_with_the_last(stderr_handler):
    lowered = _Lowered()
    debug, info = lowered.down_to("debug"), lowered.down_to("info")
    with info:
        assert OURS.getEffectiveLevel() == logging.INFO
        with debug:
            assert OURS.getEffectiveLevel() == logging.DEBUG
            logging.getLogger("frobozz.servers").debug("for the client only")
        assert OURS.getEffectiveLevel() == logging.INFO  # the debug request ended: info still in flight
    assert OURS.level == logging.NOTSET  # as it was: a later log.debug makes no record
    assert not OURS.isEnabledFor(logging.INFO)
    logging.getLogger("frobozz.servers").warning("shown")
    assert stderr_handler.getvalue() == "shown\n"  # stderr never showed the lines made for the client


def test_a_request_that_fails_still_puts_the_level_back(stderr_handler):
    lowered = _Lowered()
    with pytest.raises(RuntimeError), lowered.down_to("debug"):
        raise RuntimeError("the tool failed")
    assert OURS.level == logging.NOTSET


def test_a_level_somebody_else_sets_meanwhile_is_the_one_the_loggers_come_back_to(stderr_handler):
    lowered = _Lowered()
    with lowered.down_to("debug"):
        OURS.setLevel(logging.ERROR)  # an operator's hook, or a test's caplog
        with lowered.down_to("info"):
            assert OURS.getEffectiveLevel() == logging.DEBUG  # the debug request is still in flight
    assert OURS.level == logging.ERROR


def test_records_from_a_worker_thread_and_the_event_loop_at_once_all_reach_the_request():
    """A worker thread's record waits in the handler for the event loop; with the handler's lock held meanwhile,
    the loop's own next record waited on that lock, and nothing moved again (every run of this hung)."""
    script = """
import logging, math, threading
import anyio, anyio.lowlevel
from frobozz.servers import _logs

async def main():
    _logs._install()
    logging.getLogger("frobozz").setLevel(logging.INFO)
    send, receive = anyio.create_memory_object_stream(math.inf)
    _logs._sink.set(_logs._Sink(send, "info", threading.get_ident()))
    log = logging.getLogger("frobozz.servers")

    def worker():
        for n in range(300):
            log.info("from a worker thread %d", n)

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, worker)
        for n in range(3000):
            log.info("from the event loop %d", n)
            if n % 10 == 0:
                await anyio.lowlevel.checkpoint()
    print(receive.statistics().current_buffer_used)

anyio.run(main)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "3300"
