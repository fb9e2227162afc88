"""Fixtures for every test: a private data directory, the story files shipped beside the checkout, the
embedded Postgres, and claude run offline in its own HOME against a scripted Messages API."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from frobozz.engine import EngineOptions
from frobozz.engine.testing import ScriptedModel
from frobozz.games import GamesSettings
from tests.imapserver import start_imap

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["tests.hangs"]  # a test that hangs says where, before pytest-timeout ends it


def _games_dir() -> Path:
    configured = os.environ.get("FROBOZZ_GAMES_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "games"
    if not (path / "zork1.z5").is_file():
        raise RuntimeError(f"the tests need Zork I's story files in {path} (set FROBOZZ_GAMES_DIR)")
    return path.resolve()


GAMES_DIR = _games_dir()
ZORK1 = GAMES_DIR / "zork1.z5"
ZORK1_R119 = GAMES_DIR / "zork1-r119.z3"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run under anyio's plugin (fixtures and test share one task) on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """Rebuildable files (the embedding model's ONNX export), made once per run: every xdist worker's
    folder is in the run's own, so the workers share one export (the first makes it, the others wait)."""
    run = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    path = run / "cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(autouse=True)
def frobozz_env(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own data directory, so nothing touches the user's games or saves."""
    data_dir = tmp_path / "data"
    monkeypatch.setenv("FROBOZZ_DATA_DIR", str(data_dir))
    monkeypatch.setenv("FROBOZZ_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("FROBOZZ_GAMES_DIR", str(GAMES_DIR))
    # matplotlib's font list, built once per run, not in every test's HOME (0.6 s of CPU a run's report cost)
    monkeypatch.setenv("MPLCONFIGDIR", str(cache_dir / "matplotlib"))
    # Memory's deadlines are for people waiting on a turn; two test workers on two cores are not that.
    monkeypatch.setenv("FROBOZZ_MEMORY_DEADLINE", "15")
    yield data_dir
    if (data_dir / "postgres").is_dir():  # a test used the embedded default, which is left running by design
        from frobozz.memory import MemorySettings as Settings
        from frobozz.memory._database import stop_embedded

        stop_embedded(Settings(data_dir=data_dir))


@pytest.fixture
def settings(frobozz_env: Path) -> GamesSettings:
    return GamesSettings()


@pytest.fixture(scope="session")
def postgres():
    """One embedded Postgres with pgvector (pgserver) for the whole session, set for throwaway data: no
    flushes to disk and a small WAL (every new database is written to the WAL whole; at the default 1 GB
    of WAL a run's worker kept 0.7 GB of it). Its folder is not in pytest's: run as root, Postgres runs as
    pgserver's own user, which pgserver lets through pytest's root-only folder (o+rx), and a second pytest
    started meanwhile made that folder root's alone again: this Postgres lost its files mid-run."""
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="frobozz-pg-"))
    try:
        server = pgserver.get_server(folder / "pg", cleanup_mode="delete")
        try:
            server.psql(
                "ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off;"
                " ALTER SYSTEM SET full_page_writes = off; ALTER SYSTEM SET max_wal_size = '64MB';"
                " ALTER SYSTEM SET min_wal_size = '32MB'; SELECT pg_reload_conf();"
            )
            yield server
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def database_url(server, name: str) -> str:
    """The URL of database `name` on the embedded server (its URI uses a Unix socket)."""
    base, _, query = server.get_uri().partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def fresh_database(server) -> Iterator[str]:
    """A new database on `server`, dropped afterwards with whatever is still connected to it: a run
    that kept them all held 4 GB of the disk at its end."""
    name = f"t_{secrets.token_hex(6)}"
    server.psql(f"CREATE DATABASE {name};")
    try:
        yield name
    finally:
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE);")


@pytest.fixture
def cortex_settings(postgres, frobozz_env: Path):
    """cortex's settings on a fresh database of its own."""
    from frobozz.memory import MemorySettings as Settings

    with fresh_database(postgres) as name:
        yield Settings(database_url=database_url(postgres, name))


@pytest.fixture
async def memory_service(cortex_settings):
    """The memory library on a fresh database, closed after the test."""
    from frobozz.memory import MemoryService

    service = MemoryService(cortex_settings)
    try:
        yield service
    finally:
        await service.aclose()


@pytest.fixture
async def sessions(memory_service):
    """The memory loop's session store on a fresh database."""
    return await memory_service.sessions()


def hub_servers(names, frobozz_env: Path, cortex_settings, **env: str) -> dict:
    """The hub's real MCP servers, for claude's --mcp-config, on the test's database and data folder."""
    base = {
        "FROBOZZ_DATA_DIR": str(frobozz_env),
        "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
    }
    return {
        "mcpServers": {
            name: {"command": sys.executable, "args": ["-m", "frobozz", "serve", name], "env": {**base, **env}}
            for name in names
        }
    }


def reachable_by_others(path: Path) -> bool:
    """Whether another account can run `path`: every folder on the way searchable, the file executable."""
    path = path.resolve()
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def other_accounts_can_run_claude() -> bool:
    """Run as root, the agent service runs claude as each workspace's owner: that needs a claude other accounts
    can reach (a checkout under a private folder such as /root has none)."""
    from frobozz.engine import find_claude

    return os.geteuid() == 0 and reachable_by_others(Path(find_claude()))


def python_for_any_account() -> str:
    """A Python every account may run, for a test's MCP server that claude starts as a workspace's owner (this
    checkout's may live under root's private home)."""
    return shutil.which("python3", path="/usr/bin:/bin") or sys.executable


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder other accounts can reach (pytest's own is root's alone): where a claude run as a workspace's
    owner, when the tests are root, works. Everyone may write in `open_dir / "drop"`."""
    folder = Path(tempfile.mkdtemp(prefix="frobozz-open-"))
    folder.chmod(0o755)
    (folder / "drop").mkdir(mode=0o777)
    (folder / "drop").chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# -- the real claude CLI against a scripted Messages API ----------------------------------------
@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("CLAUDE_CONFIG_DIR", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDECODE"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def make_options(claude_home: Path) -> Callable[..., EngineOptions]:
    def make(scripted: ScriptedModel, *, env: dict[str, str] | None = None, **options: Any) -> EngineOptions:
        full_env = {**scripted.env(), "HOME": str(claude_home), "CLAUDE_CODE_MAX_RETRIES": "0", **(env or {})}
        return EngineOptions(env=full_env, cwd=claude_home, **options)

    return make


@pytest.fixture(scope="session")
def imap_server():
    """One real IMAP server (dovecot on loopback) for the session; each test adds a user of its own."""

    server = start_imap()
    yield server
    server.stop()


# -- tracing on in this process, its spans in memory ---------------------------------------------
@pytest.fixture(scope="session")
def _span_provider():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _unset_tracer_provider() -> None:
    """Back to no provider at all (the API has no public way: OpenTelemetry's own test utilities do this)."""
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    from frobozz import _spans

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    _spans._TRACER = trace.get_tracer(_spans.TRACER_NAME)  # its proxy had bound itself to the provider set


@pytest.fixture
def spans(_span_provider):
    """Tracing on in this process for one test (the SDK, its own in-memory exporter); off again after it."""
    from opentelemetry import trace

    provider, exporter = _span_provider
    _unset_tracer_provider()
    trace.set_tracer_provider(provider)
    exporter.clear()
    try:
        yield exporter
    finally:
        exporter.clear()
        _unset_tracer_provider()
