"""`frobozz routine` as a user types it: on nothing first, then add/list/show/pause/resume/remove, and bad
input refused with a clear error and nothing changed (real Postgres)."""

import contextlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from frobozz.cli import _routines as routines_cli


def at_80_columns(cortex_settings, tmp_path, *args) -> str:
    """A frobozz command as a real process in an 80-column terminal (rich reads COLUMNS there): its output."""
    env = {**os.environ, "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value()}
    env |= {"HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


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


def test_a_bad_name_is_refused_saying_the_rule_in_words_and_showing_the_name_as_text(cli):
    output = cli("routine", "add", "[bold]x\x1b[2Jy", "--every", "5", "--prompt", "x", code=2)
    assert "should match pattern" not in output and "\x1b" not in output
    assert "'[bold]x\\x1b[2Jy' is not a routine's name: letters, digits, '_', '.' and '-'" in output
    assert listed(cli) == []


def test_a_mailbox_password_given_both_in_a_variable_and_in_a_file_is_refused_and_nothing_is_stored(cli, tmp_path):
    secret = tmp_path / "imap-password"
    secret.write_text("hunter2")
    args = ["--inbox", "imaps://me@mail.example.org/INBOX", "--prompt", "x"]
    output = cli("routine", "add", "mail", *args, "--password-env", "MY_PW", "--password-file", str(secret), code=2)
    assert "--password-env NAME or --password-file FILE (one of them)" in " ".join(output.replace("│", " ").split())
    assert listed(cli) == []


def test_a_prompt_file_that_never_ends_is_refused_after_its_limit_without_reading_it_all(cli, tmp_path):
    """A pipe (as /dev/zero) has no size to check first: it was read to its end, which /dev/zero never reaches."""
    import os
    import threading

    pipe = tmp_path / "endless"
    os.mkfifo(pipe)
    written = []

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), pipe.open("wb") as f:
            for _ in range(1000):  # 64 MB: the reader should stop at the limit and a byte
                f.write(b"x" * 65536)
                written.append(65536)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    output = cli("routine", "add", "endless", "--every", "60", "--prompt-file", str(pipe), code=2)
    writer.join(timeout=30)
    assert "is over 100000 characters" in " ".join(output.replace("│", " ").split())
    assert not writer.is_alive() and sum(written) < 1_000_000
    assert listed(cli) == []


def test_a_prompt_file_is_limited_in_characters_as_an_inline_prompt_is_not_in_bytes(cli, tmp_path):
    """60,000 'é' are 120,000 bytes: refused by a limit of 100,000 bytes, where --prompt took them."""
    accented, over = tmp_path / "accented.md", tmp_path / "over.md"
    accented.write_text("é" * 60_000 + "\r\n", encoding="utf-8")
    over.write_text("é" * 100_001, encoding="utf-8")
    cli("routine", "add", "accented", "--every", "60", "--prompt-file", str(accented))
    output = cli("routine", "add", "over", "--every", "60", "--prompt-file", str(over), code=2)
    assert "is over 100000 characters" in " ".join(output.replace("│", " ").split())
    assert [r["name"] for r in listed(cli)] == ["accented"]
    shown = json.loads(cli("routine", "show", "accented", "--json"))
    assert shown["spec"]["prompt"] == "é" * 60_000 + "\n", list(shown)


def test_a_prompt_file_with_a_nul_byte_is_refused_before_the_database_sees_it(cli, tmp_path):
    binary = tmp_path / "nul"
    binary.write_bytes(b"hi\x00there")
    output = cli("routine", "add", "nul", "--every", "60", "--prompt-file", str(binary), code=2)
    assert "error: routine: the prompt holds a NUL byte" in output and "Traceback" not in output
    assert listed(cli) == []


@pytest.mark.parametrize("url", ["not a url", "", "imaps://u@/INBOX", "http://u@host/INBOX"])
def test_an_error_with_square_brackets_in_it_is_printed_as_it_is_not_taken_for_markup(cli, url):
    output = cli("routine", "add", "mail", "--inbox", url, "--prompt", "x", code=2)
    assert "an inbox is an imaps://host[:port][/folder] URL" in output
    assert listed(cli) == []


def test_a_feed_url_with_square_brackets_is_shown_whole_when_added_listed_and_shown(cli, monkeypatch):
    monkeypatch.setattr(routines_cli.out, "width", 500)  # (made when first imported, as wide as COLUMNS was then)
    url = "https://example.org/[feed]/atom.xml"
    assert url in cli("routine", "add", "news", "--feed", url, "--prompt", "Summarise.")
    assert url in cli("routine", "list") and url in cli("routine", "show", "news")


def test_a_name_that_is_not_utf8_is_no_routine_for_show_pause_resume_remove_and_run(cli):
    for command in ("show", "pause", "resume", "remove", "run"):
        output = cli("routine", command, "\udcff", code=1)
        assert "error: no routine '\\udcff'" in output and "Traceback" not in output


def test_an_empty_workspace_is_refused_not_taken_for_the_current_folder(cli, tmp_path):
    (tmp_path / "file").write_text("a file, not a folder")
    for workspace in ("", "  ", str(tmp_path / "file")):
        assert "--workspace" in cli(
            "routine", "add", "ws", "--every", "60", "--prompt", "x", "--workspace", workspace, code=2
        )
    assert listed(cli) == []
    cli("routine", "add", "ws", "--every", "60", "--prompt", "x", "--workspace", str(tmp_path / "to-be-made"))
    assert listed(cli)[0]["spec"]["workspace"] == str(tmp_path / "to-be-made")


@pytest.mark.parametrize(
    "args, error",
    [
        (["--every", "60", "--poll", "5"], "--poll is for --inbox and --feed routines, not --every ones"),
        (["--cron", "@daily", "--poll", "5"], "--poll is for --inbox and --feed routines, not --cron ones"),
        (["--every", "60", "--password-env", "FOO"], "--password-env is for --inbox routines"),
        (["--cron", "@daily", "--password-file", "/etc/shadow"], "--password-file is for --inbox routines"),
        (["--feed", "https://example.org/feed", "--tz", "Europe/Lisbon"], "--tz is for --cron routines"),
        (["--every", "60", "--model", ""], "is not a model's name"),
        (["--every", "60", "--model", "--dangerously-skip-permissions"], "is not a model's name"),
        (["--every", "60", "--max-cost", "nan"], "max_cost: Input should be a finite number"),
        (["--feed", "https://example.org/feed", "--poll", "nan"], "poll: Input should be a finite number"),
        (["--cron", "@daily", "--tz", "localtime"], "unknown time zone"),
        (["--cron", "R R * * *"], "has R (a random time)"),
        (["--feed", "http://user:pw@127.0.0.1/a"], "no user or password"),
        (["--inbox", "imaps://mail.example.org/INBOX"], "names no user"),
    ],
)
def test_an_option_that_does_not_apply_or_cannot_work_is_a_clear_error_and_adds_nothing(cli, args, error):
    output = cli("routine", "add", "r1", *args, "--prompt", "x", code=2)
    assert error in " ".join(output.replace("│", " ").split())
    assert listed(cli) == []


def test_a_feed_url_whose_scheme_is_in_capitals_is_added_in_lower_case_and_the_defaults_still_apply(cli):
    cli("routine", "add", "news", "--feed", "HTTP://127.0.0.1/a", "--prompt", "Summarise.")
    cli("routine", "add", "brief", "--cron", "@daily", "--prompt", "Brief.")
    brief, news = listed(cli)
    assert news["when"] == "feed http://127.0.0.1/a (poll 60 s)" and brief["when"] == "cron @daily (UTC)"


def test_a_firings_title_and_reason_from_outside_are_shown_as_text_not_obeyed_or_read_as_markup(
    cli, cortex_settings, monkeypatch
):
    """A mail's subject or a feed item's title (and a server's words in the reason) were markup-escaped only: an
    ESC or OSC sequence in them reached the terminal (a title set, the clipboard written)."""
    import anyio

    from frobozz.memory import MemorySettings
    from frobozz.routines import RoutineStore

    cli("routine", "add", "mail", "--every", "60", "--prompt", "Read it.")

    async def fired() -> None:
        store = await RoutineStore.open(MemorySettings(database_url=cortex_settings.database_url))
        try:
            title, reason = "Hi\x1b]0;pwned\x07 [/bold] [red]you[/red]", "server said \x1b[2J[/x]"
            await store.claim("mail", "k1", title, state="failed", reason=reason)
        finally:
            await store.aclose()

    anyio.run(fired)
    monkeypatch.setattr(routines_cli.out, "width", 500)  # (made when first imported, as wide as COLUMNS was then)
    shown = cli("routine", "show", "mail")
    assert "\x1b" not in shown and "\x07" not in shown
    assert "Hi\\x1b]0;pwned\\x07 [/bold] [red]you[/red]" in shown and "server said \\x1b[2J[/x]" in shown


def test_a_routine_run_whose_last_question_is_given_up_at_its_close_logs_no_upstream_failure(cli, monkeypatch, caplog):
    """`routine run` succeeded and logged `proxy: upstream http://127.0.0.1:… failed: ` (an empty reason): a sidecar
    question still unanswered when the firing's session closed (the last exchange's suggestions, past the wait for
    them) had its claude stopped, and the engine's close then cut its request at the proxy, which took its own cut
    for the upstream failing."""
    import logging
    import threading

    import anyio

    from frobozz.engine.testing import ScriptedModel
    from frobozz.loop import _session
    from tests.waiting import eventually

    release = threading.Event()

    def answers(request):
        text = request.last_user_text()
        if text.startswith("Here is the last exchange"):
            release.wait(60)  # answered only after the firing has ended
            return "NONE"
        return "Done: " + text.splitlines()[0][:60]

    def asked(model):
        return any(r.last_user_text().startswith("Here is the last exchange") for r in model.requests)

    async def settled(self):  # the session's wait for its suggestions ends with their question at the model
        with anyio.fail_after(120):
            await eventually(lambda: asked(model))

    monkeypatch.setattr(_session.MemorySession, "settled", settled)
    caplog.set_level(logging.DEBUG, logger="frobozz")
    try:
        with ScriptedModel(answers) as model:
            for name, value in model.env().items():
                monkeypatch.setenv(name, value)
            monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
            cli("routine", "add", "brief", "--cron", "@daily", "--prompt", "Write the morning briefing.")
            output = cli("routine", "run", "brief")
            release.set()
    finally:
        release.set()
    assert "routine brief: done (finished)" in output and asked(model), output
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in said if "proxy:" in m], said


def test_show_at_80_columns_cuts_neither_the_due_time_nor_the_run_id(cli, cortex_settings, tmp_path):
    """`routine show` in an 80-column terminal cut the firing's due time and its run id ('20261130-13425…'): both
    are whole, the long texts (a mail's subject, a reason) fold, and no line is wider than the terminal."""
    from datetime import UTC, datetime

    import anyio

    from frobozz.engine.producers import Schedule
    from frobozz.memory import MemorySettings
    from frobozz.routines import RoutineStore

    cli("routine", "add", "brief", "--cron", "30 7 * * *", "--prompt", "Brief me.")
    due = datetime(2026, 11, 30, 7, 30, tzinfo=UTC)
    subject = "Re: the quarterly numbers for the northern region, with every attachment and a long tail " * 2

    async def fired() -> None:
        store = await RoutineStore.open(MemorySettings(database_url=cortex_settings.database_url))
        try:
            await store.claim("brief", Schedule.key(due), f"due {Schedule.key(due)}", due=due)
            await store.start("brief", Schedule.key(due), "20261130-073001-abcdef")
            await store.finish("brief", Schedule.key(due), "done", "finished", cost_usd=0.0123)
            await store.claim("brief", "mail-1", subject)
            await store.start("brief", "mail-1", "20261130-073502-123456")
            reason = "time limit: the firing ran past --max-seconds and was stopped"
            await store.finish("brief", "mail-1", "failed", reason, cost_usd=1.5)
        finally:
            await store.aclose()

    anyio.run(fired)
    shown = at_80_columns(cortex_settings, tmp_path, "routine", "show", "brief")
    assert "2026-11-30T07:30:00+00:00" in shown, shown  # the due time, whole on its line
    assert "20261130-073001-abcdef" in shown and "20261130-073502-123456" in shown, shown
    assert "…" not in shown and max(len(line) for line in shown.splitlines()) <= 80, shown
    assert "$0.0123" in shown and "$1.5000" in shown and "done" in shown and "failed" in shown, shown
    assert " started 20" in shown and " ended 20" in shown, shown  # when each ran, to the second
    flat = " ".join(line.strip("│ ") for line in shown.splitlines())
    assert "--max-seconds" in flat and "northern" in flat, shown


def test_show_counts_the_firings_as_list_does_and_last_fired_is_the_last_that_started_not_one_skipped(
    cli, cortex_settings, monkeypatch
):
    """`show --json` said `"firings": {}` and `"last_fired": null` beside its own firings; and `list` gave as the
    last firing the time a skipped one was recorded (it never fired), to the microsecond."""
    import anyio

    from frobozz.memory import MemorySettings
    from frobozz.routines import RoutineStore

    cli("routine", "add", "tick", "--every", "60", "--prompt", "Tick.")
    for shown in (json.loads(cli("routine", "show", "tick", "--json")), listed(cli)[0]):  # nothing yet
        assert (shown["firings"], shown["last_fired"]) == ({}, None)

    async def fired() -> str:
        store = await RoutineStore.open(MemorySettings(database_url=cortex_settings.database_url))
        try:
            await store.claim("tick", "k1", "due 1")
            await store.start("tick", "k1", "20261130-073001-abcdef")
            await store.finish("tick", "k1", "done", "finished")
            await store.claim("tick", "k2", "due 2", state="skipped", reason="overlap")  # after it: never fired
            return str((await store.firing("tick", "k1"))["started"])
        finally:
            await store.aclose()

    started = anyio.run(fired)
    shown, in_list = json.loads(cli("routine", "show", "tick", "--json")), listed(cli)[0]
    assert shown["firings"] == in_list["firings"] == {"done": 1, "skipped": 1}
    assert str(shown["last_fired"]).replace("T", " ") == str(in_list["last_fired"]).replace("T", " ") == started
    monkeypatch.setattr(routines_cli.out, "width", 500)
    row = next(line for line in cli("routine", "list").splitlines() if "tick" in line)
    assert started[:19] in row and started[:26] not in row  # to the second


def test_a_bad_namespace_is_refused_saying_memory_s_rule_in_words(cli):
    output = " ".join(
        cli("routine", "add", "e29", "--every", "10", "--prompt", "x", "--namespace", "bad ns!", code=2).split()
    )
    assert "should match pattern" not in output and "invalid namespace 'bad ns!': 1-100 letters, digits" in output
    assert listed(cli) == []


def test_show_and_list_give_the_memory_namespace_the_routine_uses_not_an_empty_one(cli):
    """`show --json` gave the spec's namespace as "" while the routine's firings keep memory in routine-NAME."""
    cli("routine", "add", "brief", "--every", "60", "--prompt", "x")
    cli("routine", "add", "notes", "--every", "60", "--prompt", "x", "--namespace", "shared")
    assert json.loads(cli("routine", "show", "brief", "--json"))["spec"]["namespace"] == "routine-brief"
    assert json.loads(cli("routine", "show", "notes", "--json"))["spec"]["namespace"] == "shared"
    assert [r["spec"]["namespace"] for r in listed(cli)] == ["routine-brief", "shared"]
    assert "memory namespace: routine-brief" in cli("routine", "show", "brief")


def _on_store(cortex_settings, work):
    """`work(store, ledger)` on the test's database, from a synchronous test."""
    import anyio

    from frobozz.memory import MemorySettings
    from frobozz.routines import RoutineStore
    from frobozz.runner import RunLedger

    async def main():
        settings = MemorySettings(database_url=cortex_settings.database_url)
        store, ledger = await RoutineStore.open(settings), await RunLedger.open(settings)
        try:
            return await work(store, ledger)
        finally:
            await ledger.aclose()
            await store.aclose()

    return anyio.run(main)


def test_a_hand_firing_not_seen_alive_for_the_heartbeat_is_ended_abandoned_with_its_run_and_a_live_one_is_not(
    cli, cortex_settings, monkeypatch
):
    """A `routine run` killed mid-firing stayed `running` for ever in `show`, `list` and `runs`: nothing ended a
    firing by hand, which no queue gives to another worker. Not seen alive (its marks) for the worker heartbeat, it
    ends failed, abandoned, when it was last seen, and its run with it; one marked alive now goes on."""
    from frobozz.routines import BY_HAND, routine
    from frobozz.routines._fire import run_info

    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "600")  # (the live one is never stale, however slow the machine)
    cli("routine", "add", "tick", "--every", "3600", "--prompt", "Tick.")
    assert json.loads(cli("routine", "show", "tick", "--json"))["firings_list"] == []  # nothing to end
    spec = routine(name="tick", kind="every", every=3600, prompt="Tick.")
    dead, live = f"{BY_HAND}dead", f"{BY_HAND}live"

    async def fired(store, ledger):
        for key, run_id in ((dead, "20260101-000000-dead00"), (live, "20260101-000000-11fe00")):
            await store.claim("tick", key, "run by hand")
            await store.start("tick", key, run_id)
            await ledger.add(run_info(spec, run_id, "run by hand"), queued=False)
            await store.alive("tick", key)
        await store.pool.execute(  # its process was killed an hour ago, ten minutes after it started
            "UPDATE routine_firings SET started = now() - interval '70 minutes', alive = now() - interval '1 hour' "
            "WHERE key = $1",
            dead,
        )
        return await store.firing("tick", dead)

    before = _on_store(cortex_settings, fired)
    shown = json.loads(cli("routine", "show", "tick", "--json"))
    by_key = {f["key"]: f for f in shown["firings_list"]}
    assert by_key[dead]["state"] == "failed" and by_key[dead]["reason"].startswith("abandoned: the `routine run`")
    assert by_key[dead]["ended"].replace("T", " ") == str(before["alive"])  # when it was last seen
    assert by_key[live]["state"] == "running" and shown["firings"] == {"failed": 1, "running": 1}
    assert listed(cli)[0]["firings"] == {"failed": 1, "running": 1}

    async def runs(store, ledger):
        return {r: await ledger.get(r) for r in ("20260101-000000-dead00", "20260101-000000-11fe00")}

    gone, going = _on_store(cortex_settings, runs).values()
    assert (gone["status"], gone["ended_at"]) == ("failed", before["alive"]) and "abandoned" in gone["reason"]
    assert (going["status"], going["ended_at"]) == ("running", None)


def test_a_hand_firing_killed_before_it_started_is_ended_too_and_no_longer_holds_up_its_inbox(cli, cortex_settings):
    """Claimed and never started (killed at once), it stayed `queued`, an open firing: an inbox or a feed looks for
    its next item only when it has none."""
    from frobozz.routines import BY_HAND

    cli("routine", "add", "tick", "--every", "3600", "--prompt", "Tick.")

    async def claimed(store, ledger):
        await store.claim("tick", f"{BY_HAND}early", "run by hand")
        await store.pool.execute("UPDATE routine_firings SET created = now() - interval '1 hour'")
        return await store.open_firings("tick")

    assert _on_store(cortex_settings, claimed) == 1
    cli("routine", "list")
    (firing,) = json.loads(cli("routine", "show", "tick", "--json"))["firings_list"]
    assert firing["state"] == "failed" and firing["reason"].startswith("abandoned")
    assert _on_store(cortex_settings, lambda store, ledger: store.open_firings("tick")) == 0


def test_show_gives_when_each_firing_started_and_ended_not_when_it_was_queued(cli, cortex_settings, monkeypatch):
    """A row read `due 18:28:30 / finished / at 18:28:27`: the `at` was when the job was queued, before its due
    time. Each row says when its firing started and ended (running: since when; never started: when recorded)."""
    from frobozz.cli._routines import _moment

    cli("routine", "add", "tick", "--every", "3600", "--prompt", "Tick.")

    async def fired(store, ledger):
        await store.claim("tick", "k1", "due 1")
        await store.pool.execute("UPDATE routine_firings SET created = created - interval '3 minutes'")
        await store.start("tick", "k1", "20261130-073001-abcdef")
        await store.finish("tick", "k1", "done", "finished")
        await store.claim("tick", "k2", "due 2")
        await store.start("tick", "k2", "20261130-073002-abcdef")
        await store.claim("tick", "k3", "due 3", state="skipped", reason="overlap")
        return {f["key"]: f for f in await store.firings("tick")}

    firings = _on_store(cortex_settings, fired)
    monkeypatch.setattr(routines_cli.out, "width", 500)
    shown = cli("routine", "show", "tick")
    done, running, skipped = firings["k1"], firings["k2"], firings["k3"]
    assert f"started {_moment(done['started'])}" in shown and f"ended {_moment(done['ended'])}" in shown, shown
    assert _moment(done["created"]) not in shown, shown  # (three minutes before it started)
    assert (
        f"running since {_moment(running['started'])}" in shown and f"recorded {_moment(skipped['created'])}" in shown
    )
    assert " at 20" not in shown
    in_json = {f["key"]: f for f in json.loads(cli("routine", "show", "tick", "--json"))["firings_list"]}
    assert in_json["k1"]["started"].replace("T", " ") == str(done["started"])
    assert in_json["k1"]["ended"].replace("T", " ") == str(done["ended"]) and in_json["k2"]["ended"] is None


def test_list_gives_each_routine_s_next_firing_as_the_web_view_does(cli, cortex_settings, monkeypatch):
    """`routine list  # when each fires`: the `when` was only the schedule (`every 60 s`). (The web view's
    Routines page gives the same words: both call `next_firing`.)"""
    cli("routine", "add", "tick", "--every", "3600", "--prompt", "Tick.")
    cli("routine", "add", "mail", "--inbox", "imaps://u@mail.example.org/INBOX", "--prompt", "Read.")
    cli("routine", "add", "off", "--cron", "@daily", "--prompt", "Off.")
    cli("routine", "pause", "off")
    rows = {r["name"]: r for r in listed(cli)}
    assert rows["mail"]["next"] == "on new mail (looks at least every 60 s)" and rows["mail"]["next_due"] is None
    assert rows["off"]["next"] == "none while paused"
    due = datetime.fromisoformat(rows["tick"]["next_due"])
    assert due.timestamp() % 3600 == 0 and rows["tick"]["next"] == f"{due.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    monkeypatch.setattr(routines_cli.out, "width", 500)
    assert f"next: {rows['tick']['next']}" in cli("routine", "list")  # under the trigger


def test_list_at_80_columns_shows_two_feeds_of_one_host_whole(cli, cortex_settings, tmp_path):
    """Feed URLs were cut to `http://127.0.…` on 80 columns: two feeds on one host looked the same."""
    feeds = ("http://127.0.0.1:8080/feeds/alpha.xml", "http://127.0.0.1:8080/feeds/beta.xml")
    for name, url in zip(("alpha", "beta"), feeds, strict=True):
        cli("routine", "add", name, "--feed", url, "--prompt", "Summarise.")
    listed_80 = at_80_columns(cortex_settings, tmp_path, "routine", "list")
    lines = listed_80.splitlines()
    assert "…" not in listed_80 and max(len(line) for line in lines) <= 80, listed_80
    when = "".join(line.split("│")[2].strip() for line in lines if line.count("│") >= 5)  # the `when` column
    assert all(url in when for url in feeds), listed_80


def test_a_large_interval_is_added_and_listed_in_whole_seconds_and_in_days(cli):
    """`routine add big --every 31622400` printed `every 3.16224e+07 s`, and so did `list`."""
    assert "routine big: every 31622400 s (366 d);" in cli(
        "routine", "add", "big", "--every", "31622400", "--prompt", "x"
    )
    assert listed(cli)[0]["when"] == "every 31622400 s (366 d)"
