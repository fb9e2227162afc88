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
        assert busy.returncode == 1 and f"in use by process {holder.pid}" in busy.stderr, busy.stderr
        assert postmaster.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert postmaster.exists()  # the holder left it running, as the servers do
    done = frobozz("database", "stop")
    assert done.returncode == 0 and "stopped the embedded Postgres" in done.stdout, done.stderr
    assert not postmaster.exists()
    assert "is not running" in frobozz("database", "stop").stdout


@pytest.mark.anyio
async def test_serve_all_says_the_embedded_postgres_stays_running_and_how_to_stop_it(frobozz_env):
    port = free_port()
    hub = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        with anyio.fail_after(120):
            while "embedded Postgres" not in (line := await anyio.to_thread.run_sync(hub.stderr.readline)):
                assert line, "the hub exited before saying anything of its Postgres"
        assert line.startswith("note: the embedded Postgres (in ") and "stays running" in line
        assert "`frobozz database stop` stops it" in line
    finally:
        hub.terminate()
        hub.wait(timeout=60)


def test_play_with_memory_says_the_embedded_postgres_stays_running_and_how_to_stop_it(frobozz_env):
    done = frobozz("play", "zork1", "--player", "walkthrough", "--memory", "--max-turns", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert "note: the embedded Postgres" in done.stderr and "`frobozz database stop` stops it" in done.stderr
    assert (frobozz_env / "postgres" / "postmaster.pid").exists()  # as it says: still running
    plain = frobozz("play", "zork1", "--player", "walkthrough", "--max-turns", "1", "--json")
    assert plain.returncode == 0 and "Postgres" not in plain.stderr  # no memory, no database: nothing to say
