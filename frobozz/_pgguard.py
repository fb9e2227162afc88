"""The embedded Postgres a one-shot command started goes when the command goes, however it ends.

pg_ctl daemonises the server, so the kernel does not take it down with the command, and pgserver stops it
only from an exit handler, which SIGKILL never runs. So the command starts this guard beside it, holding
the write end of a pipe to the guard's stdin: the pipe reaches end-of-file when the command is gone
(exited or killed, on every system). The guard then does what pgserver's handler would have done: under
pgserver's lock, with the dead taken off its list of users (a killed process its parent has not reaped yet
is dead too), it stops the server if nobody is left. After a clean exit the handler has already stopped it
and the guard finds nothing to do.

Given a scratch folder too, the guard removes it once the server there is stopped: a bench's own Postgres and
files, which its exit handlers would have removed (`bench/_ending.py`).

Run as `python -m frobozz._pgguard PGDATA COMMAND_PID [SCRATCH]`; `guard(pgdata)` starts it. A leaf module that
imports nothing of Frobozz, so that the guard, which lives beside every such command, starts in a few
hundredths of a second of CPU (from `frobozz.memory`, whose package it had to import, it took 0.4 s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HANDLES = ".handle_pids.json"  # pgserver's list of the processes using its server, in its data directory
_GUARDS: list[subprocess.Popen[bytes]] = []  # held, so that the pipe stays open as long as this process


def guard(pgdata: Path, *, scratch: Path | None = None) -> None:
    """Start the guard for `pgdata`; it outlives this process only as long as it takes to stop the server.
    In its own session, so that a Ctrl-C meant for the command does not end the guard first. `scratch`: a
    folder (holding `pgdata`) removed once the server is stopped, nobody else using it."""
    _GUARDS.append(
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(pgdata), str(os.getpid()), *([str(scratch)] if scratch else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    )


def stop_if_unused(pgdata: Path, *, scratch: Path | None = None) -> bool:
    """Stop the server at `pgdata` when no live process holds it; whether it was stopped. `scratch`: a folder
    holding `pgdata`, removed then too (with nobody on the list, under the same lock, so none joins meanwhile)."""
    pg_ctl, server = _pgserver()
    with server._lock:
        if _forget_dead(pgdata):
            return False
        stopped = False
        if (pgdata / "postmaster.pid").exists():
            root = hasattr(os, "geteuid") and os.geteuid() == 0
            try:
                pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user="pgserver" if root else None)
                stopped = True
            except subprocess.CalledProcessError:
                pass  # already stopped
        gone = not (pgdata / "postmaster.pid").exists()  # a stop that failed leaves it running, and its files
        if scratch is not None and gone and pgdata.resolve().is_relative_to(scratch.resolve()):
            shutil.rmtree(scratch, ignore_errors=True)
        return stopped


def forget_dead_handles(postgres_dir: Path) -> None:
    """pgserver keeps the pids of the processes using its server in a file, and stops the server when the
    last one leaves; a process that died without its exit handlers (SIGKILL, SIGTERM) stays listed for
    ever, so the last never leaves. The dead are taken off the list, under pgserver's lock (a process
    adding itself meanwhile is not lost)."""
    with _pgserver()[1]._lock:
        _forget_dead(postgres_dir)


def _forget_dead(postgres_dir: Path) -> list[int]:
    """The list's live users, the dead written off it."""
    listed = _listed(postgres_dir)
    alive = _live(listed)
    if listed is not None and alive != listed:
        (postgres_dir / HANDLES).write_text(json.dumps(alive))
    return alive


def postmaster_running(pgdata: Path) -> bool:
    """Whether the server at `pgdata` runs: its pid file there, and the process it names alive (a postmaster
    killed with -9 leaves the file behind, which its next start clears)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    return is_live(pid)


def live_users(postgres_dir: Path) -> list[int]:
    """The live processes on pgserver's list of the users of the server at `postgres_dir` (read only)."""
    return _live(_listed(postgres_dir))


def _live(listed: list[Any] | None) -> list[int]:
    return [pid for pid in listed or () if isinstance(pid, int) and is_live(pid)]


def _listed(postgres_dir: Path) -> list[Any] | None:
    """pgserver's list of the server's users as it is on disk (None: none there, or not a list)."""
    try:
        pids = json.loads((postgres_dir / HANDLES).read_text())
    except (OSError, ValueError):
        return None
    return pids if isinstance(pids, list) else None


def _pgserver() -> tuple[Any, Any]:
    """pgserver's pg_ctl and its server class (whose `_lock`, across processes, guards the list of users)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at its import, by setattr
        from pgserver.postgres_server import PostgresServer
    return pg_ctl, PostgresServer


def is_live(pid: int, started: float | None = None) -> bool:
    """A process that has exited but that its parent has not reaped yet (a zombie) holds nothing: a command
    killed under a parent that waits on it later is one, for as long as that parent takes. `started`, its
    start time when known: a process that has taken the pid since is not it."""
    import psutil

    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and started in (None, process.create_time())
    except psutil.NoSuchProcess:
        return False


def _start_time(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


def main() -> None:
    pgdata = Path(sys.argv[1])
    # the command's pid is given: our parent's may be init's by the time we run (none from an older Frobozz)
    command = int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid()
    scratch = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    started = _start_time(command)
    sys.stdin.buffer.read()  # until the command that started us is gone
    # its files close a moment before it is a zombie: until then it would still count as holding the server
    for _ in range(1000):
        if not is_live(command, started):
            break
        time.sleep(0.01)
    stop_if_unused(pgdata, scratch=scratch)


if __name__ == "__main__":
    main()
