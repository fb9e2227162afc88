"""`frobozz cortex` as a user runs it: real processes, a real (embedded or given) Postgres."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.in_process import frobozz_here
from tests.orphans import command_line, running
from tests.waiting import eventually


@pytest.fixture
def cortex_env(cortex_settings, frobozz_env):
    import os

    return {**os.environ, "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value()}


def cortex(env, *args, check=True):
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "cortex", *args], capture_output=True, text=True, timeout=180, env=env
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def cortex_here(env, monkeypatch, *args, code=0):
    """`frobozz cortex ARGS` in this process (a model load and a Python start saved a call)."""
    return frobozz_here(env, monkeypatch, "cortex", *args, code=code)


def test_memories_can_be_stored_searched_exported_and_imported_elsewhere(cortex_env, tmp_path, postgres):
    from tests.conftest import database_url

    assert (
        "stored 1"
        in cortex(
            cortex_env, "store", "The brass lantern is in the living room.", "--metadata", '{"room": "living"}'
        ).stdout
    )
    assert "already stored as 1" in cortex(cortex_env, "store", "The brass lantern is in the living room.").stdout
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"content": "The troll guards the bridge.", "created_at": "2020-05-01T12:00:00+00:00"},
                {"content": "Agent B's note.", "namespace": "b"},
            ]
        )
        + "\n"
    )
    assert "imported 2 memories (0 already there)" in cortex(cortex_env, "import", str(lines)).stdout
    hits = json.loads(cortex(cortex_env, "search", "where is the lamp", "--json", "--limit", "1").stdout)
    assert hits[0]["content"] == "The brass lantern is in the living room."
    backup = tmp_path / "backup.jsonl"
    cortex(cortex_env, "export", "--output", str(backup))
    exported = [json.loads(line) for line in backup.read_text().splitlines()]
    assert [r["content"] for r in exported] == [
        "The brass lantern is in the living room.",
        "The troll guards the bridge.",
        "Agent B's note.",
    ]
    assert exported[0]["metadata"] == {"room": "living"} and exported[1]["created_at"].startswith("2020-05-01")
    postgres.psql("CREATE DATABASE restored;")
    elsewhere = {**cortex_env, "FROBOZZ_DATABASE_URL": database_url(postgres, "restored")}
    assert "imported 3 memories" in cortex(elsewhere, "import", str(backup)).stdout
    again = [json.loads(line) for line in cortex(elsewhere, "export").stdout.splitlines()]
    assert [(r["content"], r["namespace"], r["created_at"]) for r in again] == [
        (r["content"], r["namespace"], r["created_at"]) for r in exported
    ]
    assert "forgot 1" in cortex(cortex_env, "forget", "1").stdout
    assert "no memory 1" in cortex(cortex_env, "get", "1", check=False).stderr


def test_a_bad_import_file_imports_nothing(cortex_env, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n{not json\n')
    done = cortex(cortex_env, "import", str(bad), check=False)
    assert done.returncode == 1 and "line 2 is not JSON" in done.stderr
    assert json.loads(cortex(cortex_env, "recent", "--json").stdout) == []


def test_an_import_names_the_bad_line_by_its_number_in_the_file_and_says_what_is_wrong(
    cortex_env, tmp_path, monkeypatch
):
    """Every line is checked before any is stored: with batches of one, the good lines before the bad one
    would otherwise be in already. Line numbers count the blank lines too, as an editor does."""
    good = '{"content": "The lamp is in the living room."}\n\n{"content": "The troll guards the bridge."}\n'
    cases = (
        (json.dumps({"content": "x" * 10_001}), "the memory is 10,001 characters; at most 10,000"),
        ('{"content": "ok", "namespace": "../etc"}', "invalid namespace '../etc'"),
        ('{"content": "ok", "namespace": 5}', "'namespace' must be text"),
        ('{"text": "no content"}', "a memory must be a JSON object with a text 'content'"),
        ('["content"]', "a memory must be a JSON object"),
        ('{"content": "ok", "created_at": "yesterday"}', "'created_at' must be an ISO date"),
        ('{"content": "ok", "created_at": "2099-01-01T00:00:00"}', "'created_at' is 2099-01-01T00:00:00, to come"),
        ('{"content": "ok", "metadata": "[red]x"}', "'metadata' must be a JSON object"),
        ('{"content": "ok", "metadata": {"a": NaN}}', "metadata must hold finite numbers only"),
        ('{"content": "an unpaired \\ud800 escape"}', "the memory is not valid text: character 13 is a lone surrogate"),
    )
    for n, (bad, says) in enumerate(cases):
        (tmp_path / "in.jsonl").write_text(good + bad + "\n")
        args = ("import", str(tmp_path / "in.jsonl"), "--batch", "1")
        if n == 0:  # one as a real process; the others through the same CLI in this process
            done = cortex(cortex_env, *args, check=False)
            assert done.returncode == 1, done.stderr
        else:
            done = cortex_here(cortex_env, monkeypatch, *args, code=1)
        assert f"line 4: {says}" in done.stderr and "nothing was imported" in done.stderr, done.stderr
    (tmp_path / "bom.jsonl").write_bytes("\ufeff".encode() + good.encode())  # (as some editors save it)
    assert "imported 2" in cortex_here(cortex_env, monkeypatch, "import", str(tmp_path / "bom.jsonl")).stdout
    for kept in json.loads(cortex(cortex_env, "recent", "--json").stdout):
        assert not kept["content"].startswith("\ufeff")
        cortex_here(cortex_env, monkeypatch, "forget", str(kept["id"]))
    (tmp_path / "latin1.jsonl").write_bytes(b'{"content": "caf\xe9"}\n')
    done = cortex(cortex_env, "import", str(tmp_path / "latin1.jsonl"), check=False)
    assert done.returncode == 1 and "is not UTF-8 text" in done.stderr
    assert json.loads(cortex(cortex_env, "recent", "--json").stdout) == []


def test_a_memory_over_the_size_limit_is_refused_with_the_limit_and_how_to_raise_it(cortex_env):
    done = cortex(cortex_env, "store", "y" * 10_001, check=False)
    assert done.returncode == 1 and "at most 10,000 are kept (FROBOZZ_CORTEX_MAX_CONTENT_CHARS)" in done.stderr
    assert json.loads(cortex(cortex_env, "recent", "--json").stdout) == []
    assert (
        "stored 1" in cortex({**cortex_env, "FROBOZZ_CORTEX_MAX_CONTENT_CHARS": "20000"}, "store", "y" * 10_001).stdout
    )


def test_searching_a_fresh_store_finds_nothing_in_every_mode_without_an_error(frobozz_env):
    import os

    env = {**os.environ}
    env.pop("FROBOZZ_DATABASE_URL", None)  # the embedded default, as on a fresh install
    for mode in ("hybrid", "semantic", "keyword"):
        done = cortex(env, "search", "where is the lamp", "--mode", mode)
        assert "no memories found" in done.stdout and not done.stderr.strip()
    assert json.loads(cortex(env, "search", "?!", "--json").stdout) == []
    assert not (frobozz_env / "postgres" / "postmaster.pid").exists()  # a one-shot command's Postgres went with it
    killed = subprocess.Popen([sys.executable, "-c", "pass"])
    killed.wait()  # a pid no process has any more, as one killed while it held the server leaves behind
    (frobozz_env / "postgres" / ".handle_pids.json").write_text(json.dumps([killed.pid]))
    assert "no memories found" in cortex(env, "search", "lamp").stdout
    assert not (frobozz_env / "postgres" / "postmaster.pid").exists()


@pytest.fixture
def holding_export(frobozz_env, tmp_path):
    """`frobozz cortex export` into a FIFO nobody reads: it starts the embedded Postgres (and its guard), then
    waits; yields (command, guard, postmaster.pid path). Killed at the end, whatever the test did."""
    import os

    import anyio
    import psutil

    env = {**os.environ}
    env.pop("FROBOZZ_DATABASE_URL", None)
    fifo = tmp_path / "backup.jsonl"
    os.mkfifo(fifo)
    command = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "cortex", "export", "--output", str(fifo)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    postmaster = frobozz_env / "postgres" / "postmaster.pid"

    def guard() -> psutil.Process | None:
        found = [p for p in psutil.Process(command.pid).children() if "frobozz._pgguard" in " ".join(command_line(p))]
        return found[0] if found and postmaster.exists() else None

    async def started() -> psutil.Process:
        with anyio.fail_after(120):
            while (found := guard()) is None:
                assert command.poll() is None
                await anyio.sleep(0.05)
        return found

    try:
        yield command, anyio.run(started), postmaster
    finally:
        command.kill()
        command.wait()


def test_a_one_shot_command_killed_with_sigkill_does_not_leave_the_postgres_it_started(holding_export):
    """Not even while its parent has not yet waited on it: a killed command is a zombie until then, and holds
    nothing meanwhile (a command reaped at once is the simpler case: tests/test_pgguard.py)."""
    import os

    import anyio
    import psutil

    command, _, postmaster = holding_export
    server = psutil_process(postmaster)
    command.kill()  # and no wait(): it stays a zombie until the fixture's end

    async def stopped() -> None:
        with anyio.fail_after(10):
            await eventually(lambda: not (postmaster.exists() or running(server)))

    anyio.run(stopped)
    assert psutil.Process(command.pid).status() == psutil.STATUS_ZOMBIE  # not reaped while its Postgres stopped
    env = {**os.environ}
    env.pop("FROBOZZ_DATABASE_URL", None)
    assert "no memories found" in cortex(env, "search", "lamp").stdout  # and it starts again as before


def test_a_killed_one_shot_command_leaves_its_postgres_to_a_process_still_using_it(holding_export):
    from frobozz.memory import MemorySettings
    from frobozz.memory._database import embedded_url, stop_embedded

    command, guard, postmaster = holding_export
    settings = MemorySettings()
    embedded_url(settings)  # a server joins, as the next claude session's cortex would
    try:
        command.kill()
        command.wait()
        guard.wait(timeout=30)
        assert postmaster.exists() and running(psutil_process(postmaster))
    finally:
        stop_embedded(settings)


def psutil_process(postmaster):
    import psutil

    return psutil.Process(int(postmaster.read_text().split()[0]))


def test_a_one_shot_command_leaves_a_postgres_it_did_not_start_running(frobozz_env):
    import os

    from frobozz.memory import MemorySettings
    from frobozz.memory._database import embedded_url, stop_embedded

    env = {**os.environ}
    env.pop("FROBOZZ_DATABASE_URL", None)
    settings = MemorySettings()
    embedded_url(settings)  # as a server or a session leaves it, for the next start
    try:
        assert "no memories found" in cortex(env, "search", "lamp").stdout
        assert (frobozz_env / "postgres" / "postmaster.pid").exists()
    finally:
        stop_embedded(settings)


def test_min_score_leaves_out_weaker_results_and_a_bad_one_is_refused(cortex_env, monkeypatch):
    """The stores and searches in this process (`cortex_here`); the refusal is a real process's exit code."""
    cortex_here(cortex_env, monkeypatch, "store", "The brass lantern is in the living room.")
    cortex_here(cortex_env, monkeypatch, "store", "The troll guards the bridge.")
    every = json.loads(cortex_here(cortex_env, monkeypatch, "search", "brass lantern living room", "--json").stdout)
    strong = json.loads(
        cortex_here(
            cortex_env, monkeypatch, "search", "brass lantern living room", "--json", "--min-score", "0.5"
        ).stdout
    )
    assert len(strong) == 1 < len(every) and strong[0]["id"] == every[0]["id"] and strong[0]["score"] >= 0.5
    weak = cortex_here(cortex_env, monkeypatch, "search", "troll", "--min-score", "1").stdout
    assert "no memories found scoring 1.0 or more" in weak
    refused = cortex(cortex_env, "search", "troll", "--min-score", "1.5", check=False)
    assert refused.returncode == 2 and "min-score" in refused.stderr


def test_every_mode_finds_nothing_in_an_empty_namespace_window_or_among_forgotten_memories(cortex_env, monkeypatch):
    stored = cortex(cortex_env, "store", "The brass lantern is in the living room.").stdout.split()[-1]
    cortex(cortex_env, "store", "The troll guards the bridge.", "--namespace", "gone")
    cortex(cortex_env, "forget", "2")
    for mode in ("hybrid", "semantic", "keyword"):
        for args in (
            ["brass lantern", "--namespace", "empty"],
            ["brass lantern", "--since", "2999-01-01"],
            ["brass lantern", "--until", "2000-01-01T00:00:00+00:00"],
            ["troll bridge", "--namespace", "gone"],
            ["🐉🔦"],
            ["zqxj vbnm wkpf"],
        ):
            found = cortex_here(cortex_env, monkeypatch, "search", *args, "--mode", mode, "--json").stdout
            assert json.loads(found) == [], (mode, args)
    assert json.loads(cortex(cortex_env, "search", "brass lantern", "--since", "2000-01-01", "--json").stdout)[0][
        "id"
    ] == int(stored)


def test_a_fact_that_changed_is_superseded_and_get_shows_its_history(cortex_env, monkeypatch):
    """The refused second supersede is a real process (its stderr and exit code); the rest run in this one."""
    assert "stored 1" in cortex_here(cortex_env, monkeypatch, "store", "The troll lives under the bridge.").stdout
    superseded = cortex_here(cortex_env, monkeypatch, "supersede", "1", "The troll moved to the cellar.").stdout
    assert "stored 2, superseding 1" in superseded
    refused = cortex(cortex_env, "supersede", "1", "again", check=False)
    assert refused.returncode == 1 and "already superseded by memory 2" in refused.stderr
    current = json.loads(cortex_here(cortex_env, monkeypatch, "search", "troll", "--json").stdout)
    everything = json.loads(cortex_here(cortex_env, monkeypatch, "search", "troll", "--json", "--history").stdout)
    got = json.loads(cortex_here(cortex_env, monkeypatch, "get", "1").stdout)
    assert [h["id"] for h in current] == [2] and {h["id"] for h in everything} == {1, 2}
    old = next(h for h in everything if h["id"] == 1)  # told apart by valid_to, as docs/memory.md says
    assert old["superseded_by"] == 2 and old["valid_to"][:19] == got["valid_to"][:19]
    assert "valid_to" not in next(h for h in everything if h["id"] == 2)
    assert got["superseded_by"] == 2 and got["valid_to"] and [h["id"] for h in got["history"]] == [1, 2]


def test_recent_in_a_namespace_with_nothing_in_it_says_so(cortex_env):
    done = cortex(cortex_env, "recent", "--namespace", "nowhere")
    assert "no memories in namespace nowhere yet" in done.stdout and "┏" not in done.stdout
    assert json.loads(cortex(cortex_env, "recent", "--namespace", "nowhere", "--json").stdout) == []


@pytest.mark.parametrize(
    "command, says",
    [
        ("store", "Whose memories"),
        ("search", "Whose memories"),
        ("recent", "Whose memories"),
        ("export", "Only this namespace's memories (default: every namespace's)"),
    ],
)
def test_the_namespace_option_says_what_it_is(command, says):
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "cortex", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0 and says in done.stdout, done.stdout


def test_a_memory_is_stored_with_an_image_and_get_names_its_files(cortex_env, tmp_path):
    from PIL import Image

    Image.new("RGB", (1600, 1200), "teal").save(tmp_path / "map.jpg")
    (tmp_path / "fake.png").write_text("not an image")
    assert (
        "stored 1" in cortex(cortex_env, "store", "The map of the maze.", "--image", str(tmp_path / "map.jpg")).stdout
    )
    refused = cortex(cortex_env, "store", "Another.", "--image", str(tmp_path / "fake.png"), check=False)
    got = json.loads(cortex(cortex_env, "get", "1").stdout)
    assert refused.returncode == 1 and "claims to be image/png but is not" in refused.stderr
    assert got["image"]["width"] == 1600 and got["image"]["description"] is None
    assert Image.open(got["image"]["thumbnail"]).size == (768, 576)
    assert json.loads(cortex(cortex_env, "recent", "--json").stdout)[0]["id"] == 1  # the refused one left nothing


def test_an_export_that_cannot_be_written_or_read_says_so_and_leaves_an_earlier_backup_as_it_was(
    cortex_env, tmp_path, monkeypatch
):
    from frobozz.memory import BulkStore, MemoryStoreError

    missing = tmp_path / "no such folder" / "backup.jsonl"
    done = cortex_here(cortex_env, monkeypatch, "export", "--output", str(missing), code=1)
    assert "cannot write" in done.stderr and "No such file or directory" in done.stderr
    assert not missing.parent.exists()  # no folder made on the way
    assert "is a folder" in cortex_here(cortex_env, monkeypatch, "export", "--output", str(tmp_path), code=1).stderr
    backup = tmp_path / "backup.jsonl"
    backup.write_text('{"content": "last week\'s backup"}\n')
    away = {**cortex_env, "FROBOZZ_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"}  # port 9: nothing there
    assert "error" in cortex_here(away, monkeypatch, "export", "--output", str(backup), code=1).stderr

    async def fails_halfway(self, namespace):
        yield {"content": "the first memory of many"}
        raise MemoryStoreError("the database went away")

    monkeypatch.setattr(BulkStore, "export", fails_halfway)
    assert "went away" in cortex_here(cortex_env, monkeypatch, "export", "--output", str(backup), code=1).stderr
    assert backup.read_text() == '{"content": "last week\'s backup"}\n' and os.listdir(tmp_path) == ["backup.jsonl"]


@pytest.mark.parametrize("command, rest", [("get", []), ("forget", []), ("supersede", ["new text"])])
def test_a_memory_id_out_of_postgres_range_is_a_usage_error(cortex_env, monkeypatch, command, rest):
    for bad in ("0", "9223372036854775808"):
        done = cortex_here(cortex_env, monkeypatch, command, bad, *rest, code=2)
        assert "Invalid value" in done.stderr and "Traceback" not in done.stderr


def test_an_export_to_a_device_is_written_to_it_not_put_in_its_place(cortex_env, monkeypatch):
    import stat

    done = cortex_here(cortex_env, monkeypatch, "export", "--output", "/dev/null")
    assert "exported 0 memories to /dev/null" in done.stdout and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_an_export_over_a_file_its_user_may_not_write_is_refused_and_leaves_it_as_it_was():
    """Replacing it would need only its folder's permission. Run as an unprivileged user: root may write anything."""
    import shutil
    import tempfile

    as_user = [shutil.which("setpriv") or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    folder = Path(tempfile.mkdtemp(prefix="frobozz-readonly-"))
    try:
        folder.chmod(0o777)
        backup = folder / "backup.jsonl"
        backup.write_text('{"content": "kept"}\n')
        backup.chmod(0o444)
        if os.geteuid() == 0:
            os.chown(backup, 65534, 65534)
        export = [sys.executable, "-m", "frobozz", "cortex", "export", "--output", str(backup)]
        done = subprocess.run(
            [*(as_user if os.geteuid() == 0 else []), *export],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HOME": str(folder)},
        )
        assert done.returncode == 1 and f"cannot write {backup}: Permission denied" in done.stderr, done.stderr
        assert backup.read_text() == '{"content": "kept"}\n' and os.listdir(folder) == ["backup.jsonl"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_memory_is_listed_as_its_words_not_as_markup_or_terminal_codes(cortex_env, monkeypatch):
    """'[/x]' in a memory ended recent and search in a markup error; '[bold]' was taken as a style and an ESC
    sequence (from mail, a feed) went to the terminal as it was."""
    from frobozz.cli import _cortex

    monkeypatch.setattr(_cortex.out, "width", 200)  # the command's console (made at import): no cell folded
    words = "see arr[0] [/x] [bold]as is[/bold] \x1b[31mred\x1b[0m"
    cortex_here(cortex_env, monkeypatch, "store", words)
    for args in (["recent"], ["search", "arr"]):
        listed = cortex_here(cortex_env, monkeypatch, *args).stdout
        assert "[/x] [bold]as is[/bold]" in listed and "\x1b" not in listed and "\\x1b[31mred" in listed, args
    assert json.loads(cortex_here(cortex_env, monkeypatch, "recent", "--json").stdout)[0]["content"] == words


def test_metadata_that_is_not_an_object_or_an_image_that_is_not_there_is_a_usage_error(cortex_env, monkeypatch):
    """Both were said with status 1, as the store's own errors are; a bad --metadata's JSON was already a 2."""
    for args in (["--metadata", "[1, 2]"], ["--metadata", '"a string"'], ["--image", "/no/such/image.png"]):
        refused = cortex_here(cortex_env, monkeypatch, "store", "a fact", *args, code=2)
        assert "--metadata" in refused.stderr or "--image" in refused.stderr, args
    assert "no memories yet" in cortex_here(cortex_env, monkeypatch, "recent").stdout  # nothing was stored


def test_forgetting_the_current_version_of_a_changed_fact_says_the_one_before_is_current_again(cortex_env, monkeypatch):
    here = lambda *args, code=0: cortex_here(cortex_env, monkeypatch, *args, code=code)  # noqa: E731
    here("store", "Bob has a red car.")
    assert here("forget", "1").stdout.strip() == "forgot 1"  # no chain: nothing more to say
    here("store", "Bob has a red car.")
    here("supersede", "2", "Bob has a blue car.")
    here("supersede", "3", "Bob has a green car.")
    assert "memory 3, the version it superseded, is current again" in here("forget", "4").stdout
    assert [h["id"] for h in json.loads(here("search", "Bob car", "--json").stdout)] == [3]
    assert "stored 5, superseding 3" in here("supersede", "3", "Bob has a grey car.").stdout


def test_an_invalid_namespace_option_of_import_is_a_usage_error_whatever_the_lines_say(
    cortex_env, monkeypatch, tmp_path
):
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"content": "A note.", "namespace": "fine"}) + "\n")
    refused = cortex_here(cortex_env, monkeypatch, "import", str(lines), "--namespace", "../x", code=2)
    assert "--namespace" in refused.output and "invalid namespace" in refused.output
    assert json.loads(cortex_here(cortex_env, monkeypatch, "recent", "--namespace", "fine", "--json").stdout) == []


def test_an_export_piped_into_import_dash_is_imported_elsewhere(cortex_env, postgres):
    from tests.conftest import database_url

    cortex(cortex_env, "store", "The brass lantern is in the living room.")
    postgres.psql("CREATE DATABASE piped;")
    elsewhere = {**cortex_env, "FROBOZZ_DATABASE_URL": database_url(postgres, "piped")}
    exported = cortex(cortex_env, "export").stdout
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "cortex", "import", "-"],
        input=exported,
        capture_output=True,
        text=True,
        timeout=180,
        env=elsewhere,
    )
    assert done.returncode == 0, done.stderr
    assert "imported 1 memories (0 already there)" in done.stdout
    assert "brass lantern" in cortex(elsewhere, "recent").stdout


def test_import_help_says_what_a_batch_is_and_that_a_stopped_import_is_finished_by_running_it_again(
    cortex_env, monkeypatch
):
    said = " ".join(cortex_here({**cortex_env, "COLUMNS": "1000"}, monkeypatch, "import", "--help").output.split())
    assert "Lines embedded and kept per transaction" in said and "running it again imports the rest" in said
    assert "'-' reads stdin" in said


def test_reembed_reports_the_memories_it_re_embedded_leaving_out_forgotten_ones(cortex_env, monkeypatch):
    for text in ("The lamp is lit.", "The door is shut."):
        cortex_here(cortex_env, monkeypatch, "store", text)
    cortex_here(cortex_env, monkeypatch, "forget", "2")
    assert "re-embedded 1 memories" in cortex_here(cortex_env, monkeypatch, "reembed").stdout


def test_a_search_whose_since_is_not_before_its_until_is_a_usage_error(frobozz_env, monkeypatch):
    """`--since 2030-01-01 --until 2020-01-01` answered "no memories found", as if none matched."""
    env = dict(os.environ)
    for since, until in (("2030-01-01", "2020-01-01"), ("2024-05-01T12:00:00+00:00", "2024-05-01T12:00:00+00:00")):
        refused = cortex_here(env, monkeypatch, "search", "foo", "--since", since, "--until", until, code=2)
        assert "--since" in refused.stderr and "not before --until" in refused.stderr, refused.stderr
        assert "no memories found" not in refused.stdout
