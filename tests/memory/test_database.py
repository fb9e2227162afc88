"""Closing a pool: bounded, however its connections are held."""

import logging

import anyio
import asyncpg
import pytest

from frobozz._pgguard import postmaster_running
from frobozz.memory import close_pool
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def pool_of(cortex_settings) -> asyncpg.Pool:
    return await asyncpg.create_pool(cortex_settings.database_url.get_secret_value(), min_size=1, max_size=2)


async def gone(cortex_settings, backend: int) -> None:
    """Until the server's backend `backend` has ended: its connection was cut, not left open."""
    connection = await asyncpg.connect(cortex_settings.database_url.get_secret_value())
    try:
        with anyio.fail_after(30):
            await eventually(
                lambda: connection.fetchval("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $1", backend)
            )
    finally:
        await connection.close()


async def test_a_pool_with_nothing_in_use_closes_at_once_and_says_nothing(cortex_settings, caplog):
    pool = await pool_of(cortex_settings)
    backend = await pool.fetchval("SELECT pg_backend_pid()")
    with anyio.fail_after(30):
        await close_pool(pool, timeout=30)
    assert pool.is_closing() and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    await gone(cortex_settings, backend)


async def test_a_connection_never_released_is_cut_after_the_bound_and_the_pool_is_closed(cortex_settings, caplog):
    pool = await pool_of(cortex_settings)
    held = await pool.acquire()  # (a task that will never give it back)
    backend = held.get_server_pid()
    with anyio.fail_after(30):  # asyncpg's own close would wait for ever
        await close_pool(pool, timeout=0.2)
    assert pool.is_closing() and "still had connections in use after 0.2 s: they are cut" in caplog.text
    await gone(cortex_settings, backend)


async def test_a_close_that_is_cancelled_cuts_the_connections_still_in_use(cortex_settings):
    """asyncpg's own behaviour, which close_pool counts on rather than repeats."""
    pool = await pool_of(cortex_settings)
    held = await pool.acquire()
    backend = held.get_server_pid()
    with anyio.move_on_after(0.2):  # the caller gives up long before the bound
        await close_pool(pool, timeout=30)
    assert pool.is_closing()
    await gone(cortex_settings, backend)


def test_two_threads_that_start_the_embedded_postgres_at_once_get_one_and_the_same(frobozz_env):
    """pgserver's lock is a file lock, shared by the threads of a process: chat's transcript store and its
    tracing's span store started the embedded Postgres at once (`chat --trace` on fresh data), and one failed."""
    import threading

    from frobozz.memory import MemorySettings
    from frobozz.memory._database import embedded_url, stop_embedded

    settings = MemorySettings()
    urls: list[str] = []
    errors: list[BaseException] = []
    ready = threading.Barrier(2)

    def start() -> None:
        ready.wait()
        try:
            urls.append(embedded_url(settings))
        except BaseException as e:  # noqa: BLE001 - said below
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert errors == [] and len(urls) == 2 and urls[0] == urls[1], errors
    finally:
        stop_embedded(settings)


def test_a_one_shot_command_that_starts_a_killed_postgres_again_stops_it_at_its_exit(frobozz_env):
    """The Postgres the servers leave running, killed with -9, leaves its pid file behind: the next one-shot command
    (`cortex`, `doctor`) started it again but took it for one already running (the file was there), and left it
    running after it exited, and every later command too."""
    import os
    import signal
    import subprocess
    import sys

    import psutil

    from frobozz.memory import MemorySettings
    from frobozz.memory._database import stop_embedded

    settings = MemorySettings()
    env = {k: v for k, v in os.environ.items() if k != "FROBOZZ_DATABASE_URL"}
    leaves = (
        "from frobozz.memory import MemorySettings as S; from frobozz.memory._database import embedded_url as u; u(S())"
    )
    subprocess.run([sys.executable, "-c", leaves], env=env, check=True)  # as a server leaves it, for the next start
    postmaster = settings.postgres_dir / "postmaster.pid"
    killed = psutil.Process(int(postmaster.read_text().split()[0]))
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
        assert postmaster.exists()  # (left behind)
        done = subprocess.run(
            [sys.executable, "-m", "frobozz", "cortex", "search", "lamp"], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0 and "no memories found" in done.stdout, done.stderr
        assert not postmaster_running(settings.postgres_dir)  # stopped at the command's exit, as one it started
    finally:
        stop_embedded(settings)


def test_the_embedded_postgres_starts_in_a_data_folder_with_a_space_and_one_that_cannot_start_is_a_clear_error(
    tmp_path,
):
    """pgserver passes the socket folder to pg_ctl unquoted: in a folder with a space (macOS's `Application Support`)
    postgres was given `5/postgres` as an argument, and every part that used memory ended in pg_ctl's traceback."""
    from frobozz.memory import DatabaseError, MemorySettings
    from frobozz.memory._database import embedded_url, stop_embedded

    settings = MemorySettings(data_dir=tmp_path / "data 5")
    try:
        url = embedded_url(settings)
        assert " " not in url

        assert anyio.run(answer, url) == 42
        stop_embedded(settings)
        with (settings.postgres_dir / "postgresql.conf").open("a") as conf:
            conf.write("no_such_setting = 1\n")  # a server that will not start
        with pytest.raises(DatabaseError, match=r"did not start \(pg_ctl: exit status 1\); its log is .*data 5"):
            embedded_url(settings)
    finally:
        stop_embedded(settings)


def test_the_embedded_postgres_starts_and_answers_in_a_data_folder_whose_path_has_a_plus_and_a_percent(
    tmp_path, monkeypatch
):
    """`+` and `%` are safe in pg_ctl's shell command, so the socket went in the data folder, but pgserver puts that
    folder unescaped in its URI, which asyncpg decodes: `c++` was looked for as `c  `, `%41` as `A`, and nothing
    answered. And a stop that deletes a stopped server started it through pgserver unpatched: in a folder with a
    space, pg_ctl failed."""
    import pgserver.postgres_server

    from frobozz.memory import MemorySettings
    from frobozz.memory._database import embedded_url, stop_embedded

    settings = MemorySettings(data_dir=tmp_path / "c++" / "%41" / "data")
    try:
        url = embedded_url(settings)

        assert anyio.run(answer, url) == 42
    finally:
        stop_embedded(settings)
    spaced = MemorySettings(data_dir=tmp_path / "data 6")
    try:
        embedded_url(spaced)
    finally:
        stop_embedded(spaced)
    assert not postmaster_running(spaced.postgres_dir) and (spaced.postgres_dir / "PG_VERSION").exists()
    # as in a process that has started no embedded Postgres yet (`frobozz database stop --delete`, say)
    monkeypatch.setattr(pgserver.postgres_server, "find_suitable_socket_dir", ORIGINAL_SOCKET_DIR)
    stop_embedded(spaced, delete=True)
    assert not spaced.postgres_dir.exists()


def _original_socket_dir():
    import pgserver.utils

    return pgserver.utils.find_suitable_socket_dir


ORIGINAL_SOCKET_DIR = _original_socket_dir()


@pytest.mark.parametrize("url", ["postgresql://u@127.0.0.1:notaport/db", "postgresql://[::1"])
async def test_a_database_url_asyncpg_cannot_read_is_a_database_error_where_it_connects(url, tmp_path):
    """For a URL that did not pass through the settings' check: asyncpg's ValueError was a traceback."""
    from pydantic import SecretStr

    from frobozz.memory import DatabaseError, MemorySettings, migrated_pool
    from frobozz.memory._database import connect

    with pytest.raises(DatabaseError, match="the database URL cannot be read"):
        await connect(url, 1)
    settings = MemorySettings.model_construct(database_url=SecretStr(url), data_dir=tmp_path)
    with pytest.raises(DatabaseError, match="the database URL cannot be read"):
        await migrated_pool(settings, "frobozz.memory", "cortex_migrations")


async def answer(url: str) -> int:
    """What a query on `url` answers: 42 (the server is up and connected to)."""
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetchval("SELECT 42")
    finally:
        await connection.close()
