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


_HOLDER = """
import sys
from pathlib import Path
import pgserver
server = pgserver.get_server(Path(sys.argv[1]) / "pg", cleanup_mode="delete")
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_killed_process_s_scratch_folder_stays_while_another_still_holds_its_postgres_even_down():
    """The guard goes by pgserver's list of users, not by whether the server runs (it may have crashed)."""
    import tempfile

    import anyio

    from frobozz._pgguard import _pgserver
    from tests.orphans import command_line, running
    from tests.waiting import eventually

    scratch = Path(tempfile.mkdtemp(prefix="frobozz-guard-test-"))
    user = subprocess.Popen([sys.executable, "-c", _SCRATCH_USER, str(scratch)], stdout=subprocess.PIPE, text=True)
    holder = None
    try:
        assert user.stdout.readline().strip() == "ready"
        (guard,) = [p for p in psutil.Process(user.pid).children() if "frobozz._pgguard" in " ".join(command_line(p))]
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(scratch)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout.readline().strip() == "ready"
        pg_ctl, _ = _pgserver()
        pg_ctl(["-w", "stop", "-m", "immediate"], pgdata=scratch / "pg", user="pgserver" if os.geteuid() == 0 else None)
        user.kill()
        user.wait()

        async def guard_done() -> None:
            with anyio.fail_after(30):
                await eventually(lambda: not running(guard))

        anyio.run(guard_done)
        assert (scratch / "data" / "notes.md").exists()  # the holder's, still
    finally:
        for process in (user, holder):
            if process is not None:
                process.kill()
                process.wait()
        shutil.rmtree(scratch, ignore_errors=True)
