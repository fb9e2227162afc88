"""The agent service's settings (FROBOZZ_AGENT_*): each numeric one bounded, and read from a .env file too, as
every other part's are; a bad one is one line naming its variable, and `serve agent` starts nothing."""

import os
import subprocess
import sys

import pytest

from tests.ports import free_port

SERVE_AGENT = [sys.executable, "-m", "frobozz", "serve", "agent"]


def serve_agent(env: dict[str, str], workspaces, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SERVE_AGENT, "--workspaces", str(workspaces), "--port", str(free_port()), "--model", "scripted"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "name, value, said",
    [
        ("QUESTION_TIMEOUT", "-5", "greater than 0"),
        ("WEBHOOK_POLL", "0", "greater than or equal to 0.1"),  # each look is a query: 0 made ~100 a second
        ("WEBHOOK_KEEP", "-1", "greater than or equal to 1"),
        ("ATTACH_INLINE_CHARS", "-1", "greater than or equal to 0"),
        ("SHUTDOWN_TIMEOUT", "-1", "greater than 0"),
        ("FIRST_UID", "0", "greater than or equal to 1000"),  # root's
    ],
)
def test_a_bad_agent_setting_is_one_line_naming_its_variable_and_the_service_starts_nothing(
    frobozz_env, tmp_path, name, value, said
):
    workspaces = tmp_path / "ws"
    done = serve_agent({**os.environ, f"FROBOZZ_AGENT_{name}": value}, workspaces)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: FROBOZZ_AGENT_{name}: Input should be {said} (given '{value}')")
    assert not workspaces.exists() and not (frobozz_env / "postgres").exists()


def test_an_agent_setting_in_a_dotenv_file_is_read_and_a_bad_one_refused_as_its_variable_would_be(
    frobozz_env, tmp_path, monkeypatch
):
    """A .env file's FROBOZZ_AGENT_LEASE_TTL=0 was passed over (the same variable in the environment was
    refused), though every setting is read from `.env` as well."""
    from frobozz.agent import AgentSettings

    (tmp_path / ".env").write_text("FROBOZZ_AGENT_WEBHOOK_POLL=0.5\nFROBOZZ_AGENT_MAX_LIVE=3\n")
    monkeypatch.chdir(tmp_path)
    assert (AgentSettings().webhook_poll, AgentSettings().max_live) == (0.5, 3)
    (tmp_path / ".env").write_text(f"FROBOZZ_AGENT_LEASE_TTL=0\nFROBOZZ_AGENT_WORKSPACES={tmp_path / 'ws'}\n")
    done = serve_agent(os.environ, tmp_path / "ws", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "error: FROBOZZ_AGENT_LEASE_TTL: Input should be greater than or equal to 1 (given '0')" in done.stderr
    assert not (tmp_path / "ws").exists()


def test_the_agents_workspaces_and_model_in_a_dotenv_file_count_where_the_options_are_not_given(tmp_path, monkeypatch):
    """typer reads an option's variable from the environment only: `serve agent` with FROBOZZ_AGENT_WORKSPACES
    in .env said it needed --workspaces."""
    from frobozz.cli._serve import _from_dotenv

    monkeypatch.delenv("FROBOZZ_AGENT_WORKSPACES", raising=False)
    monkeypatch.delenv("FROBOZZ_AGENT_CLAUDE_MODEL", raising=False)
    (tmp_path / ".env").write_text(f"FROBOZZ_AGENT_WORKSPACES={tmp_path / 'ws'}\nFROBOZZ_AGENT_CLAUDE_MODEL=scripted\n")
    monkeypatch.chdir(tmp_path)
    assert _from_dotenv(None, None, None) == (tmp_path / "ws", None, "scripted")
    assert _from_dotenv(tmp_path / "given", None, "opus") == (tmp_path / "given", None, "opus")
