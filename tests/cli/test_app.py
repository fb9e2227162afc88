"""The console script itself: its root option, and what every command's failure on a bad setting looks like."""

import os
import subprocess
import sys

from typer.testing import CliRunner

from frobozz.cli._app import app


def test_an_unknown_log_level_is_a_usage_error_that_lists_the_levels():
    done = CliRunner().invoke(app, ["--log-level", "bogus", "games", "list"], env={"COLUMNS": "200"})
    assert done.exit_code == 2 and "'bogus' is not a level: use DEBUG, INFO" in done.output


def test_a_bad_setting_is_one_line_naming_its_variable_with_status_1_not_a_traceback():
    env = {**os.environ, "FROBOZZ_STEP_TIMEOUT": "-1"}
    games = subprocess.run([sys.executable, "-m", "frobozz", "games", "list"], env=env, capture_output=True, text=True)
    assert games.returncode == 1 and "Traceback" not in games.stderr, games.stderr
    assert "error: FROBOZZ_STEP_TIMEOUT: Input should be greater than 0 (given '-1')" in games.stderr


def test_an_empty_variable_is_as_if_unset_in_every_settings_model_not_the_current_folder(monkeypatch, tmp_path):
    """`FROBOZZ_DATA_DIR=` made a new Postgres cluster in the folder the command ran in, and listed its empty
    store: an empty value is as if unset, as XDG's own variables are."""
    from frobozz.agent.settings import AgentSettings
    from frobozz.dialogue.settings import DialogueSettings
    from frobozz.engine.settings import EngineSettings
    from frobozz.plugin.settings import PluginSettings
    from frobozz.servers.fetch import Settings as FetchSettings
    from frobozz.servers.forge import Settings as ForgeSettings
    from frobozz.servers.handoff import Settings as HandoffSettings
    from frobozz.tracing.settings import TracingSettings
    from frobozz.web.settings import WebSettings

    models = [AgentSettings, DialogueSettings, EngineSettings, PluginSettings, FetchSettings, ForgeSettings]
    models += [HandoffSettings, TracingSettings, WebSettings]  # (web's: the runner's, the games' and memory's)
    defaults = {}
    for model in models:
        monkeypatch.delenv("FROBOZZ_DATA_DIR", raising=False)
        defaults[model] = model()
    monkeypatch.chdir(tmp_path)
    for name in ("FROBOZZ_DATA_DIR", "FROBOZZ_DATABASE_URL", "FROBOZZ_CLAUDE_MODEL", "FROBOZZ_STEP_TIMEOUT"):
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("FROBOZZ_AGENT_CLAUDE_MODEL", "")
    for model in models:
        assert model() == defaults[model], model
    assert WebSettings().data_dir != tmp_path and WebSettings().data_dir.is_absolute()


def test_a_data_directory_that_cannot_be_used_is_one_line_naming_the_path_with_status_1(tmp_path):
    not_a_folder = tmp_path / "data"
    not_a_folder.write_text("a file where the data directory should be")
    env = {**os.environ, "FROBOZZ_DATA_DIR": str(not_a_folder)}
    env.pop("FROBOZZ_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "cortex", "recent"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"error: cannot use {not_a_folder}/postgres: Not a directory" in done.stderr


def test_a_setting_read_under_another_name_is_named_as_the_one_that_was_set(monkeypatch):
    """`trace_content` also reads OpenTelemetry's own variable: the error names the one given."""
    import pytest
    from pydantic import ValidationError

    from frobozz.cli._app import _settings_error
    from frobozz.engine import EngineSettings

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "maybe")
    with pytest.raises(ValidationError) as caught:
        EngineSettings()
    said = _settings_error(ExceptionGroup("in a task group", [caught.value]))
    assert said is not None and said.startswith("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: ")


def test_a_file_error_beside_another_failure_is_not_made_the_only_thing_said():
    from frobozz.cli._app import _file_error

    gone = FileNotFoundError(2, "No such file or directory", "/data/runs")
    moved = PermissionError(13, "Permission denied", "/data/.x.tmp", None, "/data/x.jsonl")
    assert _file_error(ExceptionGroup("one", [gone])) == (
        "cannot use /data/runs: No such file or directory (FROBOZZ_LOG_LEVEL=DEBUG shows where)"
    )
    assert _file_error(moved).startswith("cannot move /data/.x.tmp to /data/x.jsonl: Permission denied")
    assert _file_error(ExceptionGroup("two", [gone, RuntimeError("a bug")])) is None
    assert _file_error(OSError("no file named")) is None


def test_a_bad_setting_is_named_as_frobozz_documents_it_when_no_variable_of_its_names_is_set(monkeypatch):
    """A `.env` value is not in the environment; and several parts call their model `Settings`."""
    import pytest
    from pydantic import ValidationError

    from frobozz.cli._app import _settings_error
    from frobozz.engine import EngineSettings
    from frobozz.servers.handoff.settings import Settings as HandoffSettings

    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("FROBOZZ_TRACE_CONTENT", raising=False)
    with pytest.raises(ValidationError) as caught:
        EngineSettings(trace_content="maybe")
    assert _settings_error(caught.value).startswith("FROBOZZ_TRACE_CONTENT: ")
    with pytest.raises(ValidationError) as caught:
        HandoffSettings(handoff_max_chars=0)
    assert caught.value.title == "Settings"
    assert _settings_error(caught.value).startswith("FROBOZZ_HANDOFF_MAX_CHARS: Input should be greater than")


def test_the_note_that_the_embedded_postgres_stays_is_said_only_when_it_runs_and_never_raises(monkeypatch, tmp_path):
    """It comes after a command, in a `finally`: a settings error there would hide the command's own."""
    import io

    from rich.console import Console

    from frobozz.cli._database import say_postgres_stays

    said = io.StringIO()
    monkeypatch.delenv("FROBOZZ_DATABASE_URL", raising=False)
    monkeypatch.setenv("FROBOZZ_DATA_DIR", str(tmp_path))  # no Postgres there: not running
    say_postgres_stays(Console(file=said))
    monkeypatch.setenv("FROBOZZ_CORTEX_POOL_SIZE", "none")
    say_postgres_stays(Console(file=said))
    assert said.getvalue() == ""


def test_a_bad_secret_setting_is_named_but_its_value_is_not_repeated():
    import pytest
    from pydantic import ValidationError

    from frobozz.cli._app import _settings_error
    from frobozz.memory import MemorySettings

    with pytest.raises(ValidationError) as caught:
        MemorySettings(database_url=["postgresql://me:hunter2@db.example.org/memory"])
    said = _settings_error(caught.value)
    assert said.startswith("FROBOZZ_DATABASE_URL: ") and "(a secret: not shown)" in said and "hunter2" not in said


def test_garbage_left_at_exit_is_still_finalized_though_the_rest_is_frozen():
    """The exit handler freezes what the imports made, so the teardown skips it: what is garbage by then (here a
    cycle the collector has not reached, its collections stopped) must still have its finalizer run first."""
    script = (
        "import gc, sys\n"
        "from frobozz.cli import _app\n"
        "gc.disable()\n"
        "class Held:\n"
        "    def __del__(self):\n"
        "        print('finalized', flush=True)\n"
        "held = Held(); held.me = held; del held\n"
        "sys.argv = ['frobozz', 'games', 'list']\n"
        "_app.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("finalized"), done.stdout


def test_a_list_setting_that_cannot_be_read_is_named_as_its_variable_and_a_plain_list_is_taken(monkeypatch):
    """pydantic-settings reads a list from JSON: a plain value was a traceback (a stdio server), or blamed on
    --token (`serve all`). fetch's allowlist takes what a user writes, `127.0.0.1, 10.0.0.0/8`."""
    import pytest
    from pydantic_settings import SettingsError

    from frobozz.cli._app import _settings_error
    from frobozz.dialogue import DialogueSettings
    from frobozz.servers.fetch.settings import Settings as FetchSettings

    monkeypatch.setenv("FROBOZZ_DIALOGUE_CONSENSUS_PHRASES", "we agree")
    with pytest.raises(SettingsError) as caught:
        DialogueSettings()
    assert _settings_error(caught.value) == (
        "FROBOZZ_DIALOGUE_CONSENSUS_PHRASES: cannot be read (Expecting value: line 1 column 1 (char 0))"
    )
    for given, taken in (("127.0.0.1", ["127.0.0.1"]), (" 127.0.0.1, 10.0.0.0/8 ,", ["127.0.0.1", "10.0.0.0/8"])):
        monkeypatch.setenv("FROBOZZ_FETCH_ALLOWLIST", given)
        assert FetchSettings().fetch_allowlist == taken
    monkeypatch.setenv("FROBOZZ_FETCH_ALLOWLIST", '["localhost"]')
    assert FetchSettings().fetch_allowlist == ["localhost"]
    env = {**os.environ, "FROBOZZ_FETCH_ALLOWLIST": "[not json", "FROBOZZ_HUB_TOKEN": "t" * 32}
    serve = [sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", "1"]
    hub = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=120)
    assert hub.returncode == 1 and "error: FROBOZZ_FETCH_ALLOWLIST:" in hub.stderr and "--token" not in hub.stderr


def test_a_log_level_in_a_dotenv_file_is_read_and_a_bad_one_is_one_line_naming_its_variable(tmp_path):
    """FROBOZZ_LOG_LEVEL=bogus in .env was passed over (typer reads the environment only), though every other
    setting is read from `.env` as well."""
    (tmp_path / ".env").write_text("FROBOZZ_LOG_LEVEL=bogus\n")
    env = {key: value for key, value in os.environ.items() if key != "FROBOZZ_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "games", "list"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: FROBOZZ_LOG_LEVEL: 'bogus' is not a level: use DEBUG, INFO"), done.stderr
    (tmp_path / ".env").write_text("FROBOZZ_LOG_LEVEL=debug\n")
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "games", "list"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert logging_at_debug(env, tmp_path)


def logging_at_debug(env: dict[str, str], cwd) -> bool:
    """Whether the root logger is at DEBUG in a command run in `cwd` (its .env's level)."""
    probe = "import logging, sys\nfrom frobozz.cli import app\napp(['games', 'list'], standalone_mode=False)\n"
    probe += "print(logging.getLogger().level)\n"
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=cwd, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1] == str(10)
