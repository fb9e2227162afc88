import pytest

from frobozz.routines import RoutineSettings, RoutineStore
from frobozz.runner import RunLedger


@pytest.fixture
def routine_settings(frobozz_env, tmp_path, monkeypatch, cortex_settings) -> RoutineSettings:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR", "CLAUDECODE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir(exist_ok=True)
    return RoutineSettings()


@pytest.fixture
async def store(routine_settings, cortex_settings):
    opened = await RoutineStore.open(cortex_settings)
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
async def ledger(routine_settings, cortex_settings):
    opened = await RunLedger.open(cortex_settings, size=8)
    try:
        yield opened
    finally:
        await opened.aclose()
