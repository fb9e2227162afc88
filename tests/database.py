"""The tests' Postgres seen from outside the code under test: a test's own database by name, and SQL run as
the server's administrator (to take that database away, end its backends, or bring it back)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import asyncpg


def database_name(settings: Any) -> str:
    """The name of the database that `settings.database_url` points at."""
    return str(settings.database_url.get_secret_value()).partition("?")[0].rsplit("/", 1)[1]


async def admin(postgres: Any, sql: str) -> None:
    """Run `sql` on the tests' Postgres server (`postgres`: the session's pgserver) as its administrator."""
    connection = await asyncpg.connect(postgres.get_uri())
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@contextlib.contextmanager
def refusing_connections(postgres: Any, name: str) -> Iterator[None]:
    """Database `name` taken away for the block (no new connection; those it had, ended), then given back."""
    postgres.psql(
        f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false; "
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}';"
    )
    try:
        yield
    finally:
        postgres.psql(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true;")
