import pytest

from frobozz.runner import RunnerSettings


@pytest.fixture
def runner_settings(frobozz_env, tmp_path, monkeypatch) -> RunnerSettings:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # claude's own files stay in the test's folder
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR", "CLAUDECODE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    return RunnerSettings()
