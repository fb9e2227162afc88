"""`frobozz routine` as a user types it: on nothing first, then add/list/show/pause/resume/remove, and bad
input refused with a clear error and nothing changed (real Postgres)."""

import json

import pytest
from typer.testing import CliRunner

from frobozz.cli._app import app


@pytest.fixture
def cli(cortex_settings, monkeypatch, tmp_path):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def invoke(*args, code=0):
        done = runner.invoke(app, list(args), env={"COLUMNS": "500"})
        assert done.exit_code == code, done.output
        return done.output

    return invoke


def listed(cli):
    return json.loads(cli("routine", "list", "--json"))


def test_on_nothing_list_says_so_and_show_pause_resume_remove_run_name_the_missing_routine(cli):
    assert "no routines yet" in cli("routine", "list") and listed(cli) == []
    for command in ("show", "pause", "resume", "remove", "run"):
        assert "no routine 'ghost'" in cli("routine", command, "ghost", code=1)


def test_a_routine_is_added_listed_shown_paused_resumed_and_removed(cli, tmp_path):
    prompt = tmp_path / "brief.md"
    prompt.write_text("Write my morning briefing.")
    assert "every worker" not in cli(
        "routine",
        "add",
        "brief",
        "--cron",
        "30 7 * * 1-5",
        "--tz",
        "Europe/Lisbon",
        "--prompt-file",
        str(prompt),
        "--max-turns",
        "5",
        "--max-cost",
        "0.5",
    )
    cli("routine", "add", "news", "--feed", "https://example.org/atom.xml", "--poll", "300", "--prompt", "Summarise.")
    rows = listed(cli)
    assert [r["name"] for r in rows] == ["brief", "news"]
    assert rows[0]["when"] == "cron 30 7 * * 1-5 (Europe/Lisbon)" and rows[0]["spec"]["prompt"] == prompt.read_text()
    assert rows[0]["spec"]["max_turns"] == 5 and rows[1]["when"] == "feed https://example.org/atom.xml (poll 300 s)"
    assert "no firings yet" in cli("routine", "show", "brief")
    assert json.loads(cli("routine", "show", "brief", "--json"))["firings_list"] == []
    cli("routine", "pause", "brief")
    assert "paused" in cli("routine", "list") and listed(cli)[0]["paused"]
    cli("routine", "resume", "brief")
    assert not listed(cli)[0]["paused"]
    assert "already" in cli("routine", "add", "brief", "--every", "60", "--prompt", "x", code=1)
    cli("routine", "remove", "brief")
    assert [r["name"] for r in listed(cli)] == ["news"]


@pytest.mark.parametrize(
    "args, error",
    [
        (["--cron", "99 * * * *", "--prompt", "x"], "invalid cron expression"),
        (["--cron", "@daily", "--tz", "Atlantis/Capital", "--prompt", "x"], "unknown time zone"),
        (["--cron", "@daily", "--every", "5", "--prompt", "x"], "exactly one of"),
        (["--prompt", "x"], "exactly one of"),
        (["--every", "5"], "--prompt TEXT or --prompt-file"),
        (["--every", "5", "--prompt", "x", "--prompt-file", "/etc/hostname"], "one of them"),
        (["--every", "5", "--prompt-file", "/nonexistent/prompt.md"], "cannot be read"),
        (["--every", "0.5", "--prompt", "x"], "greater than or equal to 1"),
        (["--every", "nan", "--prompt", "x"], "finite number"),
        (["--cron", "0 0 31 2 *", "--prompt", "x"], "never comes: no month has that day"),
        (["--every", "5", "--prompt", "x", "--model", "scripted"], "--model scripted is for chat and serve agent"),
        (["--every", "5", "--prompt", "  \n "], "prompt is empty"),
        (["--inbox", "imap://me@mail.example.org/INBOX", "--prompt", "x"], "in the clear"),
        (["--inbox", "imaps://me:hunter2@mail.example.org/INBOX", "--prompt", "x"], "no password in the IMAP URL"),
        (["--feed", "javascript:alert(1)", "--prompt", "x"], "http:// or https://"),
        (["--every", "5", "--prompt", "x", "--max-cost", "-1"], "max_cost"),
        (["--every", "5", "--prompt", "x", "--game", "no-such-game"], "--game"),
        (["--inbox", "imaps://me@mail.example.org", "--password", "hunter2", "--prompt", "x"], "No such option"),
    ],
)
def test_bad_input_is_a_clear_error_and_adds_nothing(cli, args, error):
    output = cli("routine", "add", "r1", *args, code=2)
    flat = " ".join(output.replace("│", " ").split())
    assert error in flat and "hunter2" not in flat.replace("me:hunter2", "").replace("--password hunter2", "")
    assert listed(cli) == []


def test_a_hostile_name_is_refused(cli):
    for name in ("../../etc", "a b", "x" * 65, "-rf"):
        cli("routine", "add", name, "--every", "5", "--prompt", "x", code=2)
    assert listed(cli) == []
