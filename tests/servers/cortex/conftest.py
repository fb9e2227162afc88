"""One embedded Postgres (pgserver, with pgvector) for the session; a fresh database for each test."""

from __future__ import annotations

import secrets
from pathlib import Path

import pgserver
import pytest

from frobozz.servers.cortex import Settings


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield server
    server.cleanup()


def database_url(server, name: str) -> str:
    uri = server.get_uri()
    base, _, query = uri.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


@pytest.fixture
def cortex_settings(postgres, frobozz_env: Path) -> Settings:
    name = f"t_{secrets.token_hex(6)}"
    postgres.psql(f"CREATE DATABASE {name};")
    return Settings(database_url=database_url(postgres, name))
