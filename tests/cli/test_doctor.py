"""`frobozz doctor` as a user runs it, on a good install and on a broken one."""

import os
import subprocess
import sys

from tests.otlp import receiver


def doctor(env):
    return subprocess.run(
        [sys.executable, "-m", "frobozz", "doctor"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "250", **env},
    )


def test_a_good_install_passes_every_check(frobozz_env, cortex_settings):
    done = doctor({"FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value()})
    assert done.returncode == 0, done.stdout + done.stderr
    for found in (
        "one of the versions the engine was tested with",
        "Postgres 16",
        "pgvector 0.6",
        "all-MiniLM-L6-v2 (384 dims",
        "zork1",
        "played a turn of zork1: 'West of House'",
    ):
        assert found in done.stdout
    assert "FAIL" not in done.stdout


def test_a_broken_install_says_what_is_wrong_and_how_to_fix_each_part(frobozz_env, tmp_path):
    empty = tmp_path / "no-games"
    empty.mkdir()
    done = doctor(
        {
            "FROBOZZ_CLAUDE_PATH": str(tmp_path / "no-claude"),
            "FROBOZZ_GAMES_DIR": str(empty),
            "FROBOZZ_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nothing",
            "FROBOZZ_EMBEDDING_PROVIDER": "ollama",
            "FROBOZZ_EMBEDDING_URL": "http://127.0.0.1:1",
            "FROBOZZ_EMBEDDING_MODEL": "nomic-embed-text",
            "FROBOZZ_EMBEDDING_DIM": "768",
        }
    )
    assert done.returncode == 1
    assert done.stdout.count("FAIL") == 5 and "5 problem(s)" in done.stderr
    for fix in (
        "npm install -g @anthropic-ai/claude-code",
        "FROBOZZ_DATABASE_URL is right",
        "check FROBOZZ_EMBEDDING_URL",
        "frobozz games install zork1",
        "install a game first",
    ):
        assert fix in done.stdout


OLD_CLAUDE = """#!/bin/sh
# a claude from before the engine's time (a unit-test double): an old version that refuses newer flags
case " $* " in *" --version "*) echo "2.0.1 (Claude Code)"; exit 0;; esac
for a in "$@"; do
  case "$a" in --session-mirror|--effort|--resume-session-at=*) echo "error: unknown option '$a'" >&2; exit 1;; esac
done
exit 0
"""


# the checks these tests are not about, failing at once (no embedded Postgres started, no model loaded)
ELSEWHERE_QUICK = {
    "FROBOZZ_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nothing",
    "FROBOZZ_EMBEDDING_PROVIDER": "ollama",
    "FROBOZZ_EMBEDDING_URL": "http://127.0.0.1:1",
}


def test_a_tested_claude_is_not_asked_flag_by_flag(tmp_path):
    """Asking is a claude process a flag (about 0.7 s of CPU each); the suite passed on a tested version."""
    from frobozz.engine import TESTED_CLI_VERSIONS as TESTED
    from frobozz.engine import inspect_cli

    tested = tmp_path / "claude"  # a double of a tested version that would refuse every flag, were it asked
    tested.write_text(
        f'#!/bin/sh\necho "$*" >> {tmp_path / "asked"}\n'
        f'case " $* " in *" --version "*) echo \'{TESTED[-1]} (Claude Code)\'; exit 0;; esac\n'
        "echo \"error: unknown option '$1'\" >&2; exit 1\n"
    )
    tested.chmod(0o755)
    report = inspect_cli(str(tested))
    assert (report.version, report.tested, report.lacking, report.problem) == (TESTED[-1], True, (), None)
    assert (tmp_path / "asked").read_text().splitlines() == ["--version"]


def test_an_older_claude_is_named_with_what_it_lacks_in_one_line_and_no_traceback(frobozz_env, tmp_path):
    old = tmp_path / "claude"
    old.write_text(OLD_CLAUDE)
    old.chmod(0o755)
    done = doctor({"FROBOZZ_CLAUDE_PATH": str(old), **ELSEWHERE_QUICK})
    [line] = [line for line in done.stdout.splitlines() if line.startswith("claude CLI: claude 2.0.1")]
    assert "not a version the engine was tested with (2.1.197, 2.1.330)" in line
    assert "--session-mirror (session_store" in line and "--effort (effort)" in line
    assert "--resume-session-at (resume_session_at)" in line and "--thinking" not in line
    assert "Traceback" not in done.stdout + done.stderr
    broken = tmp_path / "broken-claude"
    broken.write_text("#!/bin/sh\necho 'segfault' >&2; exit 139\n")
    broken.chmod(0o755)
    done = doctor({"FROBOZZ_CLAUDE_PATH": str(broken), **ELSEWHERE_QUICK})
    assert "`--version` failed: segfault" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_the_tracing_endpoint_is_said_to_take_spans_to_be_down_or_to_be_misconfigured(monkeypatch):
    import anyio
    import pytest

    from frobozz.cli._doctor import Problem, check_tracing

    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    assert "no OTEL_EXPORTER_OTLP_ENDPOINT set" in anyio.run(check_tracing)
    with receiver() as got:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", got.url)
        assert "takes OTLP spans (HTTP 200)" in anyio.run(check_tracing)
        assert got.requests == 1
        got.status = 401
        with pytest.raises(Problem, match="refused the credentials"):
            anyio.run(check_tracing)
    with pytest.raises(Problem, match="cannot be reached") as down:
        anyio.run(check_tracing)
    assert "start the tracing backend" in down.value.fix
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "s3cr3t")
    with pytest.raises(Problem, match="OTEL_EXPORTER_OTLP_HEADERS is malformed") as bad:
        anyio.run(check_tracing)
    assert "s3cr3t" not in str(bad.value)


def test_on_a_fresh_home_it_names_the_games_folder_and_says_claude_is_not_logged_in(frobozz_env, tmp_path):
    home = tmp_path / "fresh-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "FROBOZZ_GAMES"))}
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "doctor"],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **env,
            "HOME": str(home),
            "COLUMNS": "250",
            "FROBOZZ_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nothing",
        },
    )
    games = frobozz_env / "games"  # where `frobozz games install` puts them: named, though not made yet
    assert f"no story files in {games}" in done.stdout, done.stdout
    line = next(line for line in done.stdout.splitlines() if line.startswith("claude login"))
    assert "not logged in" in done.stdout and "/login" in done.stdout and "--player walkthrough" in done.stdout
    assert "claude login" not in done.stderr  # said, but not a failure: offline play needs no login
    assert line


def test_a_damaged_story_is_the_games_checks_failure_with_its_fix_and_jericho_is_not_blamed(frobozz_env, monkeypatch):
    """An empty zork1.z5: the doctor said "games installed: ok", then failed jericho with a compiler to install."""
    import anyio
    import pytest

    from frobozz.cli._doctor import Problem, check_games, check_jericho
    from frobozz.games import GamesSettings

    monkeypatch.delenv("FROBOZZ_GAMES_DIR")
    settings = GamesSettings()
    settings.installed_games_dir.mkdir(parents=True)
    (settings.installed_games_dir / "zork1.z5").write_bytes(b"")
    with pytest.raises(Problem, match=r"damaged story file .*zork1\.z5: .*shorter than a header") as games:
        anyio.run(check_games, settings)
    assert str(settings.installed_games_dir / "zork1.z5") in str(games.value)
    assert "`frobozz games install zork1`" in games.value.fix and "remove" in games.value.fix
    with pytest.raises(Problem, match="no game to try it on") as jericho:
        anyio.run(check_jericho, settings)
    assert "damaged" in str(jericho.value) and "jericho" not in jericho.value.fix


def test_a_damaged_story_file_not_in_the_catalogue_is_the_games_checks_failure_with_its_own_fix(
    frobozz_env, monkeypatch
):
    """It was passed over: "games installed: ok" for a folder whose only story file could not be played."""
    import anyio
    import pytest

    from frobozz.cli._doctor import Problem, check_games
    from frobozz.games import GamesSettings

    monkeypatch.delenv("FROBOZZ_GAMES_DIR")
    settings = GamesSettings()
    settings.installed_games_dir.mkdir(parents=True)
    (settings.installed_games_dir / "mine.z5").write_bytes(b"not a story")
    with pytest.raises(Problem, match=r"damaged story file .*mine\.z5: .*not a Z-machine story file") as games:
        anyio.run(check_games, settings)
    assert str(settings.installed_games_dir / "mine.z5") in games.value.fix and "remove" in games.value.fix
    assert "games install" not in games.value.fix  # (no such game in the catalogue)


def test_a_data_directory_that_is_a_file_is_the_data_directory_checks_failure_with_its_own_fix(frobozz_env, tmp_path):
    """FROBOZZ_DATA_DIR=/etc/passwd: jericho was blamed ("pip install jericho") for the journal it could not write."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    done = doctor({**ELSEWHERE_QUICK, "FROBOZZ_DATA_DIR": str(a_file)})
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if line.startswith("data directory:"))
    assert f"FROBOZZ_DATA_DIR {a_file} is not a folder" in line, done.stdout
    assert "set FROBOZZ_DATA_DIR to a folder you can write" in done.stdout
    assert "pip install jericho" not in done.stdout and "Not a directory" not in done.stdout
    assert "played a turn of zork1" in done.stdout  # (FROBOZZ_GAMES_DIR's game, its journal kept elsewhere)
    assert a_file.read_text() == "not a folder"


def test_a_data_directory_inside_a_file_or_unwritable_is_named_and_one_not_made_yet_is_fine(tmp_path):
    from frobozz.cli._doctor import data_dir_problem

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert "cannot be made: " + str(a_file) + " is not a folder" in data_dir_problem(a_file / "data")
    assert data_dir_problem(tmp_path / "not" / "made" / "yet") is None
    assert not (tmp_path / "not").exists()
    if os.geteuid() != 0:  # (root writes anywhere)
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert "is not writable" in data_dir_problem(locked / "data")


def test_the_jericho_check_writes_nothing_in_the_data_directory(frobozz_env):
    """Each `doctor` left a game session's journal in FROBOZZ_DATA_DIR/sessions."""
    import anyio

    from frobozz.cli._doctor import check_jericho
    from frobozz.games import GamesSettings

    assert anyio.run(check_jericho, GamesSettings()).startswith("played a turn of")
    assert not frobozz_env.exists() or list(frobozz_env.rglob("*")) == []
