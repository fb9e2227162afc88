"""The database: the URL given, or a private Postgres with pgvector (pgserver) in the data directory,
reused across runs; a pool with pgvector's codec; migrations applied under an advisory lock."""

from __future__ import annotations

import hashlib
import logging
import re
import subprocess
import threading
import warnings
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import asyncpg
from pgvector.asyncpg import register_vector

from frobozz._pgguard import forget_dead_handles, guard, live_users, postmaster_running, stop_if_unused

from .exceptions import DatabaseError
from .settings import MemorySettings

if TYPE_CHECKING:
    from pgserver import PostgresServer

log = logging.getLogger("frobozz.cortex")
_LOCK = 0x636F7274  # "cort": one migration at a time, whichever server starts first


_ONE_SHOT = False
# what a database that is away, or goes away, raises: a part that keeps going without it catches these
DATABASE_ERRORS = (OSError, DatabaseError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError)
# seconds a new connection may take to be made: a database that hangs (accepts, never answers) held a command's
# start for asyncpg's 60 s before it said anything; a database that answers takes milliseconds, a remote one a few
CONNECT_TIMEOUT = 10.0
# what making a connection raises when it cannot be made; a ValueError is asyncpg's DSN parser's, for a URL it cannot
# read (a port that is no number, an IPv6 host without its `]`): a traceback, before
_CONNECT_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError)


def _unreachable(e: BaseException) -> DatabaseError:
    """The error for a connection that could not be made (a TimeoutError's own words are none)."""
    if isinstance(e, ValueError) and not isinstance(e, asyncpg.InterfaceError):  # asyncpg's DSN parser's own
        return DatabaseError(f"the database URL cannot be read: {e}")
    said = f"it did not answer within {CONNECT_TIMEOUT:g} s" if isinstance(e, TimeoutError) else str(e)
    return DatabaseError(f"cannot reach the database: {said}")


def stop_embedded_at_exit() -> None:
    """For a one-shot command (`frobozz cortex …`, `doctor`): an embedded Postgres this process has to
    start is stopped when it exits, or is killed (once no other process holds it: pgserver counts them,
    and a guard process stands in for its exit handler after a SIGKILL). One already
    running, as the servers and sessions leave it for the next start, is left as it is."""
    global _ONE_SHOT
    _ONE_SHOT = True


# One thread of a process at a time starts the embedded Postgres: pgserver's lock is a file lock, which the
# threads of one process share (chat's transcript store and the tracing's span store started it at once, and
# pgserver failed an assertion: `chat --trace` on fresh data ended in a traceback)
_STARTING = threading.Lock()
# what pg_ctl may be given as the socket folder: pgserver passes it as `-o "-k FOLDER"`, which pg_ctl puts unquoted
# in the shell command that starts postgres (and postgres splits at commas); a space (macOS's `Application Support`)
# made it two arguments, and the server never started. Nor `+` or `%`: pgserver puts the folder unescaped in its
# connection URI (`postgresql://postgres:@/postgres?host=FOLDER`), which asyncpg decodes as a query string (a `+`
# read as a space, `%41` as `A`): the server started, and was looked for in a folder that is not there
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_./:@=-]+")


def _socket_dir(pgdata: Path, runtime_path: Path) -> Path:
    """The folder for the embedded Postgres's socket: its data folder, as pgserver has it, when that path is short
    enough for a socket and safe in pg_ctl's shell command; else a folder of its own under pgserver's runtime folder
    (named as pgserver names its own, for a data folder whose path is too long)."""
    from pgserver.utils import find_suitable_socket_dir

    if _SHELL_SAFE.fullmatch(str(pgdata)):
        return find_suitable_socket_dir(pgdata, runtime_path)
    folder = runtime_path / hashlib.sha256(f"{pgdata}-{pgdata.stat().st_ino}".encode()).hexdigest()[:10]
    if not _SHELL_SAFE.fullmatch(str(folder)):
        raise DatabaseError(
            f"the embedded Postgres cannot start in {pgdata}: neither it nor {runtime_path} is a path without spaces "
            "or shell characters; set FROBOZZ_DATA_DIR to one that is, or FROBOZZ_DATABASE_URL to a database"
        )
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def embedded_server(pgdata: Path, cleanup_mode: str | None = "stop") -> PostgresServer:
    """pgserver's `get_server`, its socket in the folder `_socket_dir` chooses: every call of it goes through here
    (one unpatched, such as a stop that starts a stopped server to delete it, failed in a folder with a space)."""
    import pgserver.postgres_server as pgserver

    pgserver.find_suitable_socket_dir = _socket_dir  # (pgserver's only say in where the socket goes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on machines without one
        return pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)


def _start_embedded(settings: MemorySettings, started_here: bool) -> str:
    server = embedded_server(settings.postgres_dir, cleanup_mode="stop" if started_here else None)
    if not postmaster_running(settings.postgres_dir):  # this process's handle, on a server that stopped under it
        with server._lock:  # (pgserver hands a process its handle again, and starts nothing)
            server.ensure_postgres_running()
    if started_here:
        guard(server.pgdata)  # and stops it if the command is killed before its exit handler can
    return server.get_uri()


def embedded_url(settings: MemorySettings) -> str:
    """Start (or reuse) the embedded Postgres; its URI uses a Unix socket in its data directory. It is
    left running for the next start (MCP servers come and go with each claude session), but for a one-shot
    command that started it."""
    settings.postgres_dir.mkdir(parents=True, exist_ok=True)
    with _STARTING:
        forget_dead_handles(settings.postgres_dir)
        # (not running: no pid file, or one a postmaster killed with -9 left, which this start clears)
        started_here = _ONE_SHOT and not postmaster_running(settings.postgres_dir)
        try:
            return _start_embedded(settings, started_here)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:  # (a traceback before)
            command = Path(str(e.cmd[0] if isinstance(e.cmd, list | tuple) else e.cmd)).name
            raise DatabaseError(
                f"the embedded Postgres in {settings.postgres_dir} did not start ({command}: "
                f"{'it timed out' if isinstance(e, subprocess.TimeoutExpired) else f'exit status {e.returncode}'}); "
                f"its log is {settings.postgres_dir / 'log'}"
            ) from e


def stop_embedded(settings: MemorySettings, *, delete: bool = False) -> None:
    """Stop the embedded Postgres (it is otherwise left running for the next start); `delete` removes
    its files too, for scratch databases such as the benchmarks'."""
    if not postmaster_running(settings.postgres_dir) and not delete:
        return  # (killed with -9, it is not running: pgserver's stop failed on its pid file)
    if (settings.postgres_dir / "PG_VERSION").exists():
        forget_dead_handles(settings.postgres_dir)  # or a killed user would keep it running
        server = embedded_server(settings.postgres_dir)  # this process's own handle, if it has one
        server.cleanup_mode = "delete" if delete else "stop"
        server.cleanup()


STOP_HINT = "frobozz database stop"  # what stops the embedded Postgres the servers and runs leave running


def embedded_users(settings: MemorySettings) -> list[int] | None:
    """The live processes that hold the embedded Postgres (none: it may be stopped); None when it is not
    running. Reads its files only: it starts nothing."""
    if not postmaster_running(settings.postgres_dir):  # (killed with -9: its pid file left, and nothing running)
        return None
    return live_users(settings.postgres_dir)


def stop_embedded_unused(settings: MemorySettings) -> bool:
    """Stop the embedded Postgres when no live process holds it (as the guard of a one-shot command does);
    whether it was stopped."""
    return stop_if_unused(settings.postgres_dir)


def embedded_note(settings: MemorySettings) -> str | None:
    """What a command that leaves the embedded Postgres running tells its user; None with a database of
    one's own (FROBOZZ_DATABASE_URL), which is not Frobozz's to stop."""
    if settings.database_url is not None:
        return None
    return (
        f"the embedded Postgres (in {settings.postgres_dir}) stays running after this ends, for the next "
        f"run, server or session to reuse; `{STOP_HINT}` stops it"
    )


async def database_url(settings: MemorySettings) -> str:
    """The database to use: FROBOZZ_DATABASE_URL, or the embedded Postgres (started if need be)."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return await anyio.to_thread.run_sync(embedded_url, settings)


HNSW_INDEX = (
    "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) "
    "WITH (m = 16, ef_construction = 96)"
)  # as migration 010 builds it
# The graph built in memory, as migration 010 has it: with Postgres's default 64 MB, a graph of 384 dimensions
# outgrows it after about 28k memories and the build goes on on disk (100k: 64 s instead of 18). This transaction only.
INDEX_MEMORY = "SET LOCAL maintenance_work_mem = '512MB'"

# Enough candidates for filtered kNN and for clustered memories. Given at connection start, so it is
# the session's default: a plain SET would be undone by the RESET ALL a pool runs on every release.
SESSION = {"hnsw.ef_search": "200"}


async def _init(connection: asyncpg.Connection) -> None:
    await register_vector(connection)


async def _keep_session(connection: asyncpg.Connection) -> None:
    """What the pool does to a connection given back: nothing more than asyncpg always does (roll back a
    transaction left open, drop its listeners). Its default also sends `RESET ALL; UNLISTEN *; CLOSE ALL;
    pg_advisory_unlock_all()`, a round trip on every release, a third of a search's and a fifth of a store's
    under load. Nothing on this pool changes its session: settings are given at connection start (`SESSION`),
    locks are transaction locks, and the agent's listener removes itself (its UNLISTEN)."""


async def connect(url: str, size: int) -> asyncpg.Pool:
    """A pool whose connections know pgvector's type. The extension is created first if missing,
    under the migration lock: two servers starting at once must not both create it."""
    try:
        first = await asyncpg.connect(url, timeout=CONNECT_TIMEOUT)
    except _CONNECT_ERRORS as e:
        raise _unreachable(e) from e
    try:
        async with first.transaction():
            await first.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
            await first.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except asyncpg.PostgresError as e:
        raise DatabaseError(f"the database cannot provide pgvector: {e}") from e
    finally:
        await first.close()
    try:
        return await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=size,
            init=_init,
            server_settings=SESSION,
            reset=_keep_session,
            timeout=CONNECT_TIMEOUT,
        )
    except _CONNECT_ERRORS as e:
        raise _unreachable(e) from e


POOL_CLOSE_TIMEOUT = 10.0  # seconds a closing pool waits for its connections still in use


async def close_pool(pool: asyncpg.Pool, timeout: float = POOL_CLOSE_TIMEOUT) -> None:  # noqa: ASYNC109 - the bound
    """Close `pool`, waiting at most `timeout` seconds for connections still in use to come back, then cutting
    them: asyncpg's own close waits for ever for a connection that is never released, and a service's shutdown
    (or a test's teardown) with it. (A close that is cancelled, asyncpg cuts at once itself.)"""
    with anyio.move_on_after(timeout) as waited:
        await pool.close()  # (cut short, asyncpg's close terminates the pool itself)
    if waited.cancelled_caught:
        log.warning("the database pool still had connections in use after %g s: they are cut", timeout)


def _migrations(package: str) -> list[tuple[int, str, str]]:
    folder = resources.files(package) / "migrations"
    found = []
    for item in folder.iterdir():
        if item.name.endswith(".sql"):
            number = int(item.name.split("_", 1)[0])
            found.append((number, item.name, item.read_text(encoding="utf-8")))
    return sorted(found)


async def migrate(pool: asyncpg.Pool, *, dim: int, model: str) -> None:
    """cortex's tables, for memories of `dim` dimensions made by `model`."""
    await apply_migrations(
        pool, __package__, "cortex_migrations", {"{dim}": str(int(dim)), "{model}": model.replace("'", "''")}
    )


async def apply_migrations(
    pool: asyncpg.Pool, package: str, ledger: str, substitutions: dict[str, str] | None = None
) -> None:
    """Apply the pending migrations in `package`'s migrations folder (each part that owns tables has one,
    and its own `ledger` table of what was applied), in one transaction, under a lock, so two processes
    never race."""
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await connection.execute(
            f"CREATE TABLE IF NOT EXISTS {ledger} (version int PRIMARY KEY, "
            "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await connection.fetch(f"SELECT version FROM {ledger}")}
        for version, name, sql in _migrations(package):
            if version in done:
                continue
            log.info("applying migration %s", name)
            for key, value in (substitutions or {}).items():
                sql = sql.replace(key, value)
            await connection.execute(sql)
            await connection.execute(f"INSERT INTO {ledger} (version, name) VALUES ($1, $2)", version, name)


async def migrated_pool(settings: MemorySettings, package: str, ledger: str, *, size: int = 4) -> asyncpg.Pool:
    """A pool on the configured database (or the embedded one) with `package`'s migrations applied: for a
    part that keeps its own tables there (the run queue's ledger, shared game sessions)."""
    url = await database_url(settings)
    try:
        pool = await asyncpg.create_pool(url, min_size=1, max_size=size, timeout=CONNECT_TIMEOUT)
    except _CONNECT_ERRORS as e:
        raise _unreachable(e) from e
    try:
        await apply_migrations(pool, package, ledger)
    except BaseException:
        await close_pool(pool)
        raise
    return pool
