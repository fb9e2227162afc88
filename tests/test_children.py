"""Children die with their parent, however it ends (PR_SET_PDEATHSIG through setpriv, on Linux)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from frobozz._children import dying_with_parent
from tests.orphans import descendants, still_running

PARENT = """
import anyio, sys
from frobozz._children import dying_with_parent

async def main():
    process = await anyio.open_process(dying_with_parent([sys.executable, "-c", "import time; time.sleep(120)"]))
    print(process.pid, flush=True)
    await anyio.sleep(120)

anyio.run(main)
"""


def test_a_program_that_cannot_be_found_is_left_as_it_is_so_starting_it_fails_as_before():
    assert dying_with_parent(["no-such-program-here", "-x"]) == ["no-such-program-here", "-x"]
    assert dying_with_parent([]) == []


@pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("setpriv"), reason="Linux with setpriv")
def test_a_child_started_this_way_is_killed_when_its_parent_is_killed_with_sigkill():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        children = descendants(parent.pid)
        assert [p.pid for p in children] == [child_pid]
        deadline = time.monotonic() + 10  # setpriv execs in place (the same process), a moment after it starts
        while children[0].cmdline()[0].endswith("setpriv") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert children[0].cmdline()[:2] == [sys.executable, "-c"]
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert still_running(children, within=5) == []
    finally:
        parent.kill()
