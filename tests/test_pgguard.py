"""Who holds the embedded Postgres: the guard's notion of a live process."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

from frobozz._pgguard import is_live


def test_a_process_is_live_while_it_runs_and_not_once_it_is_a_zombie_or_gone():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert is_live(child.pid)
    child.stdin.close()  # it exits
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # until it has, left unreaped: a zombie
    assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE and not is_live(child.pid)
    child.wait()
    assert not is_live(child.pid)


def test_a_pid_that_another_process_has_taken_since_is_not_the_one_that_held_it():
    me = psutil.Process()
    assert is_live(me.pid, me.create_time())
    assert not is_live(me.pid, me.create_time() - 60)  # the same pid, started at another time


_SCRATCH_USER = """
import sys, time
from pathlib import Path
import pgserver
from frobozz._pgguard import guard
scratch = Path(sys.argv[1])
server = pgserver.get_server(scratch / "pg", cleanup_mode="delete")
guard(server.pgdata, scratch=scratch)
(scratch / "data").mkdir()
(scratch / "data" / "notes.md").write_text("what a bench writes beside its Postgres")
print("ready", flush=True)
time.sleep(600)
"""


def test_a_killed_process_s_scratch_postgres_is_stopped_and_its_scratch_folder_removed():
    """As a bench's exit handlers would have done (bench/_ending.py's scratch_postgres)."""
    import tempfile

    import anyio

    from tests.orphans import running
    from tests.waiting import eventually

    scratch = Path(tempfile.mkdtemp(prefix="frobozz-guard-test-"))
    user = subprocess.Popen([sys.executable, "-c", _SCRATCH_USER, str(scratch)], stdout=subprocess.PIPE, text=True)
    try:
        assert user.stdout.readline().strip() == "ready"
        postgres = psutil.Process(int((scratch / "pg" / "postmaster.pid").read_text().split()[0]))
        user.kill()
        user.wait()

        async def gone() -> None:
            with anyio.fail_after(30):
                await eventually(lambda: not scratch.exists() and not running(postgres))

        anyio.run(gone)
    finally:
        user.kill()
        user.wait()
        shutil.rmtree(scratch, ignore_errors=True)
