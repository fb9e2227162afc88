"""The embedded Postgres a one-shot command started goes when the command goes, however it ends.

pg_ctl daemonises the server, so the kernel does not take it down with the command, and pgserver stops it
only from an exit handler, which SIGKILL never runs. So the command starts this guard beside it, holding
the write end of a pipe to the guard's stdin: the pipe reaches end-of-file when the command is gone
(exited or killed, on every system). The guard then does what pgserver's handler would have done: under
pgserver's lock, with the dead taken off its list of users, it stops the server if nobody is left. After a
clean exit the handler has already stopped it and the guard finds nothing to do.

Run as `python -m frobozz._pgguard PGDATA`; `guard(pgdata)` starts it. A leaf module that imports nothing of
Frobozz, so that the guard, which lives beside every such command, starts in a few hundredths of a second of CPU
(from `frobozz.memory`, whose package it had to import, it took 0.4 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_GUARDS: list[subprocess.Popen[bytes]] = []  # held, so that the pipe stays open as long as this process


def guard(pgdata: Path) -> None:
    """Start the guard for `pgdata`; it outlives this process only as long as it takes to stop the server.
    In its own session, so that a Ctrl-C meant for the command does not end the guard first."""
    _GUARDS.append(
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(pgdata)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    )


def stop_if_unused(pgdata: Path) -> bool:
    """Stop the server at `pgdata` when no live process holds it; whether it was stopped."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # made at its import, by setattr
        from pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        forget_dead_handles(pgdata)
        try:
            users = json.loads((pgdata / ".handle_pids.json").read_text())
        except (OSError, ValueError):
            users = []
        if users or not (pgdata / "postmaster.pid").exists():
            return False
        root = hasattr(os, "geteuid") and os.geteuid() == 0
        try:
            pg_ctl(["-w", "stop", "-m", "fast"], pgdata=pgdata, user="pgserver" if root else None)
        except subprocess.CalledProcessError:
            return False  # already stopped
        return True


def forget_dead_handles(postgres_dir: Path) -> None:
    """pgserver keeps the pids of the processes using its server in a file, and stops the server when the
    last one leaves; a process that died without its exit handlers (SIGKILL, SIGTERM) stays listed for
    ever, so the last never leaves. The dead are taken off the list."""
    import psutil

    handles = postgres_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    if isinstance(pids, list):
        alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
        if alive != pids:
            handles.write_text(json.dumps(alive))


def main() -> None:
    pgdata = Path(sys.argv[1])
    sys.stdin.buffer.read()  # until the command that started us is gone
    stop_if_unused(pgdata)


if __name__ == "__main__":
    main()
