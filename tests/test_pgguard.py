"""Who holds the embedded Postgres: the guard's notion of a live process."""

import os
import subprocess
import sys

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
