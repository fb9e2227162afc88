import pytest

from frobozz.runner import RunLedger, RunnerSettings, serve_in_process


@pytest.fixture(autouse=True)
def memory_servers_in_process():
    """As `frobozz play` and `worker` have it: a memory run's cortex and handoff in the run's own process (a test
    that wants the stdio servers, the runner's own default, says `serve_in_process(None)`)."""
    from frobozz.servers import load_server

    serve_in_process(load_server)
    yield
    serve_in_process(None)


@pytest.fixture
def runner_settings(frobozz_env, tmp_path, monkeypatch) -> RunnerSettings:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # claude's own files stay in the test's folder
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR", "CLAUDECODE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    return RunnerSettings()


@pytest.fixture
async def ledger(cortex_settings, monkeypatch):
    """The runs' tables on a fresh database, FROBOZZ_DATABASE_URL pointing at it (for the workers)."""
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    opened = await RunLedger.open(cortex_settings, size=8)
    try:
        yield opened
    finally:
        await opened.aclose()
