"""`frobozz database stop`, and the commands that leave the embedded Postgres running saying so: real
processes on the test's own data folder (its own embedded Postgres)."""

import os
import subprocess
import sys

import anyio
import pytest

from tests.ports import free_port

HOLD = (
    "from frobozz.memory import MemorySettings\nfrom frobozz.memory._database import embedded_url\n"
    "embedded_url(MemorySettings())\nprint('ready', flush=True)\nimport sys\nsys.stdin.read()\n"
)


def _env() -> dict[str, str]:
    env = {**os.environ}
    env.pop("FROBOZZ_DATABASE_URL", None)  # the embedded default, as on a fresh install
    env.pop("FROBOZZ_HUB_TOKEN", None)
    return env


def frobozz(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "frobozz", *args], capture_output=True, text=True, timeout=300, env=env or _env()
    )


def test_stop_with_nothing_running_says_so_and_a_database_of_ones_own_is_not_touched(frobozz_env):
    done = frobozz("database", "stop")
    assert done.returncode == 0 and "is not running" in done.stdout, done.stderr
    assert not (frobozz_env / "postgres" / "postmaster.pid").exists()  # it did not start one to stop it
    mine = frobozz("database", "stop", env={**_env(), "FROBOZZ_DATABASE_URL": "postgresql://127.0.0.1:9/none"})
    assert mine.returncode == 1 and "FROBOZZ_DATABASE_URL is set" in mine.stderr


def test_stop_leaves_a_postgres_in_use_and_stops_it_once_nobody_holds_it(frobozz_env):
    postmaster = frobozz_env / "postgres" / "postmaster.pid"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        busy = frobozz("database", "stop")
        assert busy.returncode == 1, busy.stderr
        assert f"in use by process {holder.pid} (python -c from frobozz.memory import" in busy.stderr, busy.stderr
        assert postmaster.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert postmaster.exists()  # the holder left it running, as the servers do
    done = frobozz("database", "stop")
    assert done.returncode == 0 and "stopped the embedded Postgres" in done.stdout, done.stderr
    assert not postmaster.exists()
    assert "is not running" in frobozz("database", "stop").stdout


def test_stop_after_the_postgres_was_killed_says_it_is_not_running(frobozz_env):
    """A postmaster killed with -9 leaves its pid file: `database stop` printed pg_ctl's failure (23 lines) and
    said the server was "in use by a process not known"."""
    import signal

    from frobozz.memory import MemorySettings
    from frobozz.memory._database import embedded_url

    embedded_url(MemorySettings())
    postmaster = frobozz_env / "postgres" / "postmaster.pid"
    os.kill(int(postmaster.read_text().split("\n", 1)[0]), signal.SIGKILL)
    done = frobozz("database", "stop")
    assert done.returncode == 0 and "is not running" in done.stdout, done.stdout + done.stderr
    assert done.stderr == ""


def test_a_user_of_the_postgres_is_named_by_what_it_runs_as_typed_with_its_codes_shown_not_obeyed(monkeypatch):
    """`database stop` said "in use by process 4242" and listed the commands that might be it (not chat)."""
    import psutil

    from frobozz.cli._database import _named

    lines = {
        1: [sys.executable, "-m", "frobozz", "chat", "--namespace", "attic"],
        2: ["/opt/claude/bin/claude", "-p", "x" * 200],
        3: ["python", "\x1b]0;pwned\x07"],
    }

    class Process:
        def __init__(self, pid):
            if pid not in lines:
                raise psutil.NoSuchProcess(pid)
            self.pid = pid

        def cmdline(self):
            return lines[self.pid]

    monkeypatch.setattr(psutil, "Process", Process)
    assert _named(1) == "process 1 (frobozz chat --namespace attic)"
    assert _named(2) == f"process 2 (claude -p {'x' * 70}…)"  # cut at 80 characters
    assert _named(3) == "process 3 (python \\x1b]0;pwned\\x07)"
    assert _named(4) == "process 4"


def test_stop_refused_for_the_plugins_memory_daemon_says_how_to_stop_it(monkeypatch):
    """`database stop` said the Postgres was in use by the daemon ("stop that first") and not how."""
    import psutil
    from typer.testing import CliRunner

    from frobozz import memory
    from frobozz.cli import app

    daemon = [sys.executable, "-m", "frobozz", "plugin", "daemon", "--socket", "/tmp/frobozz-0/memory-x.sock"]
    lines = {4242: daemon, 4343: [sys.executable, "-m", "frobozz", "chat"]}

    class Process:
        def __init__(self, pid):
            self.pid = pid

        def cmdline(self):
            return lines[self.pid]

    monkeypatch.setattr(psutil, "Process", Process)
    monkeypatch.setattr(memory, "embedded_users", lambda settings: [4242, 4343])
    done = CliRunner().invoke(app, ["database", "stop"], env={"FROBOZZ_DATABASE_URL": None}, catch_exceptions=False)
    said = " ".join(done.stderr.split())
    assert done.exit_code == 1, done.output
    assert "in use by process 4242 (frobozz plugin daemon --socket" in said and "(`kill 4242 4343`)" in said
    assert "process 4242 is the Claude Code plugin's memory daemon" in said and "`frobozz plugin uninstall`" in said
    assert "4343 is" not in said


async def _hub_said(env: dict[str, str]) -> tuple[str, str]:
    """What `serve all --http` says as it starts (up to its web view's address), and from then to its end (Ctrl-C)."""
    import signal

    hub = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", str(free_port())],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    started = ""
    try:
        with anyio.fail_after(120):
            while not (line := await anyio.to_thread.run_sync(hub.stderr.readline)).startswith("web view:"):
                assert line, f"the hub exited before it served: {started}"
                started += line
        await anyio.sleep(1)  # (its handler of Ctrl-C in place)
        hub.send_signal(signal.SIGINT)
        ended = await anyio.to_thread.run_sync(hub.stderr.read)
        assert hub.wait(timeout=60) == 0, ended
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait(timeout=60)
    return started, ended


@pytest.mark.anyio
async def test_serve_all_says_a_running_embedded_postgres_stays_running_and_how_to_stop_it(frobozz_env):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env()
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        started, ended = await _hub_said(_env())
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    [line] = [line for line in (started + ended).splitlines() if "embedded Postgres" in line]
    assert line.startswith("note: the embedded Postgres (in ") and "stays running" in line
    assert "`frobozz database stop` stops it" in line


@pytest.mark.anyio
async def test_serve_all_says_nothing_of_an_embedded_postgres_it_never_started(frobozz_env):
    """It said the embedded Postgres "stays running" though nothing had started it, and `database stop` then
    found none running."""
    started, ended = await _hub_said(_env())
    assert "Postgres" not in started + ended, started + ended
    assert not (frobozz_env / "postgres" / "postmaster.pid").exists()


def test_play_with_memory_says_the_embedded_postgres_stays_running_and_how_to_stop_it(frobozz_env):
    done = frobozz("play", "zork1", "--player", "walkthrough", "--memory", "--max-turns", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert "note: the embedded Postgres" in done.stderr and "`frobozz database stop` stops it" in done.stderr
    assert (frobozz_env / "postgres" / "postmaster.pid").exists()  # as it says: still running
    plain = frobozz("play", "zork1", "--player", "walkthrough", "--max-turns", "1", "--json")
    assert plain.returncode == 0 and "Postgres" not in plain.stderr  # no memory, no database: nothing to say
