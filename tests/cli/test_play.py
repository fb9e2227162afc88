"""`frobozz play` as a user runs it: real processes, signals, exit codes and JSON on stdout."""

import fcntl
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time

import anyio
import pytest

from frobozz.engine.testing import ApiError, ScriptedModel
from frobozz.runner import RunStore, run_row
from frobozz.runner._prompts import turn_in
from tests.cli.in_process import frobozz_here
from tests.httpserver import serve
from tests.orphans import descendants, still_running


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(HOME=str(tmp_path / "home"), **extra)
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def _play(tmp_path, *args, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "frobozz", "play", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or _env(tmp_path),
    )


def _start(tmp_path, *args):
    return subprocess.Popen(
        [sys.executable, "-m", "frobozz", "play", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        start_new_session=True,
    )


def _wait_for_turns(run_dir_parent, count, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for turns in run_dir_parent.glob("*/turns.jsonl"):
            if len(turns.read_text().splitlines()) >= count:
                return turns.parent
        time.sleep(0.1)
    raise AssertionError(f"no run reached {count} turns")


def test_a_run_killed_halfway_resumes_to_the_same_final_score(frobozz_env, tmp_path):
    """Eight commands a reply (--multi), which the resumed run keeps: a fifth of the CPU of one a reply."""
    process = _start(tmp_path, "zork1", "--player", "walkthrough", "--multi", "--json")
    run_dir = _wait_for_turns(frobozz_env / "runs", 150)
    os.killpg(process.pid, signal.SIGKILL)  # the runner, claude, the interpreter: all at once
    process.wait()
    kept = len(run_dir.joinpath("turns.jsonl").read_text().splitlines())
    listed = anyio.run(run_row, None, run_dir.parent, run_dir.name)  # run.json still says "running", 0 turns
    committed = len(RunStore.open(run_dir.parent, run_dir.name).turns(repair=False))  # (kept, or one more in
    assert (listed["status"], listed["reason"], listed["turns"]) == ("stopped", "killed", committed)  # its snapshot)
    assert committed in (kept, kept + 1)
    done = _play(tmp_path, "--resume", run_dir.name, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["run_id"], result["score"], result["won"], result["turns"]) == (run_dir.name, 350, True, 396)
    turns = [json.loads(line) for line in run_dir.joinpath("turns.jsonl").read_text().splitlines()]
    assert [t["turn"] for t in turns] == list(range(1, 397)) and kept >= 150  # nothing lost, nothing twice


def test_ctrl_c_stops_cleanly_with_everything_saved_and_the_run_resumes(frobozz_env, tmp_path):
    process = _start(tmp_path, "zork1", "--player", "walkthrough", "--json")
    run_dir = _wait_for_turns(frobozz_env / "runs", 20)
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err  # as a shell reports a Ctrl-C, with how to go on
    assert f"--resume {run_dir.name}" in " ".join(err.split())
    result = json.loads(out)
    assert result["reason"] == "interrupted" and result["turns"] >= 20
    assert (run_dir / "score.png").exists() and "| reason | interrupted |" in (run_dir / "transcript.md").read_text()
    more = json.loads(
        _play(tmp_path, "--resume", run_dir.name, "--max-turns", str(result["turns"] + 5), "--json").stdout
    )
    assert (more["turns"], more["reason"]) == (result["turns"] + 5, "max turns")


def test_ctrl_c_before_the_first_turn_stops_the_run_as_a_later_one_does_and_it_resumes(frobozz_env, tmp_path):
    """A Ctrl-C while the run was being set up (its claude and game starting) left it `running` with no turn,
    listed as killed, and said nothing; now it stops as a Ctrl-C mid-run does."""
    process = _start(tmp_path, "zork1", "--player", "walkthrough", "--json")
    runs = frobozz_env / "runs"
    deadline = time.monotonic() + 120
    while not list(runs.glob("*/run.json")):  # the run is made: its claude and its game are starting
        assert time.monotonic() < deadline and process.poll() is None, "no run was made"
        time.sleep(0.01)
    (run_dir,) = [path.parent for path in runs.glob("*/run.json")]
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert f"--resume {run_dir.name}" in " ".join(err.split())
    result = json.loads(out)
    committed = len(RunStore.open(runs, run_dir.name).turns(repair=False))
    assert (result["status"], result["reason"], result["turns"]) == ("stopped", "interrupted", committed)
    listed = anyio.run(run_row, None, runs, run_dir.name)
    assert (listed["status"], listed["reason"], listed["turns"]) == ("stopped", "interrupted", committed)
    more = json.loads(_play(tmp_path, "--resume", run_dir.name, "--max-turns", str(committed + 3), "--json").stdout)
    assert (more["run_id"], more["turns"], more["reason"]) == (run_dir.name, committed + 3, "max turns")
    turns = [json.loads(line)["turn"] for line in (run_dir / "turns.jsonl").read_text().splitlines()]
    assert turns == list(range(1, committed + 4))


def test_claude_not_logged_in_is_said_plainly_with_both_fixes(tmp_path):
    for blank in ({}, {"ANTHROPIC_API_KEY": " \t", "CLAUDE_CODE_OAUTH_TOKEN": ""}):  # (a key of spaces is none)
        done = _play(tmp_path, "zork1", env=_env(tmp_path, **blank))
        assert done.returncode == 1
        message = " ".join(done.stderr.split())
        assert "not logged in" in message and "/login" in message and "--player walkthrough" in message
    auto = _play(tmp_path, "zork1", "--player", "auto", "--max-turns", "2", "--json")
    assert auto.returncode == 0 and "playing with walkthrough" in auto.stderr
    assert "--player walkthrough" not in auto.stderr  # no advice to do what it is doing already
    assert json.loads(auto.stdout)["player"] == "walkthrough"


def test_the_claude_player_plays_through_the_real_cli_and_its_api_without_the_users_frobozz_plugin(tmp_path):
    """With the Frobozz Claude Code plugin installed, its hooks ran in the game's claude too (a daemon started, each
    game turn archived as the user's own conversation)."""
    from frobozz.plugin import PluginSettings, daemon_pid, stop_daemon

    def model(request):
        n = turn_in(request.last_user_text())
        return f"<command>{['open mailbox', 'read leaflet', 'n'][n]}</command>" if n is not None and n < 3 else "?"

    with ScriptedModel(model) as api:
        env = _env(tmp_path, **api.env())
        installed = subprocess.run(
            [sys.executable, "-m", "frobozz", "plugin", "install"], env=env, capture_output=True, text=True, timeout=180
        )
        assert installed.returncode == 0, installed.stderr
        socket = PluginSettings(data_dir=env["FROBOZZ_DATA_DIR"]).socket
        try:
            done = _play(tmp_path, "zork1", "--max-turns", "3", "--json", env=env)
            assert daemon_pid(socket) is None
        finally:
            stop_daemon(socket)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["player"], result["turns"], result["reason"]) == ("claude", 3, "max turns")
    assert result["cost_usd"] > 0


def test_a_run_claude_fails_in_exits_1_with_its_reason_and_no_score_yet(tmp_path):
    """The model refuses the key: the run is failed, and play said so only in its summary, exiting 0 (with the
    score 'None/350')."""
    with ScriptedModel(lambda request: ApiError(401, "authentication_error", "invalid x-api-key")) as api:
        done = _play(
            tmp_path, "zork1", "--max-turns", "3", env=_env(tmp_path, **api.env(), CLAUDE_CODE_MAX_RETRIES="0")
        )
    assert done.returncode == 1, done.stderr
    summary = " ".join(done.stdout.split())
    assert "failed: Invalid API key" in summary and " - 0 " in summary and "None" not in summary, summary
    run_id = next(line.split()[0] for line in done.stdout.splitlines() if line.strip().startswith("2"))
    assert RunStore.open(tmp_path / "data" / "runs", run_id).info.status == "failed"


def test_several_runs_in_parallel_get_a_combined_summary(tmp_path):
    done = _play(
        tmp_path, "zork1", "--player", "walkthrough", "--runs", "3", "--parallel", "2", "--max-turns", "3", "--json"
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert len({r["run_id"] for r in results}) == 3 and all(r["turns"] == 3 for r in results)
    table = _play(tmp_path, "zork1", "--player", "walkthrough", "--runs", "2", "--max-turns", "2")
    assert table.returncode == 0 and "Frobozz runs" in table.stdout and table.stdout.count("transcript:") == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--player", "robot"], "unknown player 'robot': use claude"),
        (["--mode", "telepathy"], "use text or tools"),
        (["--resume", "../../etc"], "is not a run id"),
        (["--resume", ""], "'' is not a run id"),  # (not a new run)
        (["--resume", "[/x]"], "'[/x]' is not a run id"),  # (a markup error before)
        (["--resume", "20200101-000000-abcdef", "--runs", "2"], "a resume plays the one run it names"),
        (["--resume", "20200101-000000-abcdef"], "no run 20200101-000000-abcdef"),
        (["--player", "script:/no/such/file"], "cannot read the script"),
        (["nosuchgame", "--player", "walkthrough"], "no game 'nosuchgame'"),
        (["--max-turns", "0"], "greater than or equal to 1"),
        (["--max-time", "inf"], "finite number"),
        (["--model", "bad model"], "'bad model' is not a model's name"),  # (claude then failed every turn)
        (["--max-cost", "inf"], "finite number"),
        (["--memory", "bad namespace!"], "'bad namespace!' is not a namespace"),
        (["--memory", "x" * 101], "is not a namespace"),
    ],
)
def test_bad_play_arguments_are_clear_errors(tmp_path, monkeypatch, args, message):
    """The first case is a real process; the others run in this one (`frobozz_here`)."""
    game = [] if not args[0].startswith("-") else ["zork1"]
    if args == ["--player", "robot"]:
        done = _play(tmp_path, *game, *args, timeout=60)
        code, said = done.returncode, done.stderr
        assert code == 2  # a usage error, as a bad --mode is (it was 1)
    else:
        done = frobozz_here(_env(tmp_path), monkeypatch, "play", *game, *args, code=None)
        code, said = done.exit_code, done.stderr
    assert code != 0 and message in " ".join(said.split())


def test_a_run_another_process_plays_is_refused_and_a_prompt_file_that_is_not_text_makes_no_run(
    frobozz_env, tmp_path, monkeypatch
):
    """Two resumes of one run both played it, their turns interleaved in one record (a score of 292 and 350 for
    one run). The lock is held here as a process playing the run holds it."""
    env = _env(tmp_path)
    first = json.loads(
        frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--json").stdout
    )
    run_dir = frobozz_env / "runs" / first["run_id"]
    before = (run_dir / "run.json").read_bytes()
    held = os.open(run_dir / "lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = frobozz_here(env, monkeypatch, "play", "--resume", first["run_id"], "--max-turns", "6", code=1)
    finally:
        os.close(held)
    assert "is being played by another process now" in " ".join(busy.stderr.split())
    assert (run_dir / "run.json").read_bytes() == before and first["turns"] == 3
    more = frobozz_here(env, monkeypatch, "play", "--resume", first["run_id"], "--max-turns", "6", "--json").stdout
    assert (json.loads(more)["turns"], json.loads(more)["reason"]) == (6, "max turns")
    turns = [json.loads(line)["turn"] for line in (run_dir / "turns.jsonl").read_text().splitlines()]
    assert turns == [1, 2, 3, 4, 5, 6]

    latin1 = tmp_path / ("a-folder-whose-name-is-longer-than-a-terminal-is-wide-" * 2) / "prompt.txt"
    latin1.parent.mkdir()
    latin1.write_bytes(b"Jouez au caf\xe9.\n")
    bad = frobozz_here(
        env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--prompt-file", str(latin1), code=1
    )
    assert f"the prompt file {latin1} cannot be read" in bad.stderr  # one line, the path whole
    assert [p.name for p in (frobozz_env / "runs").iterdir()] == [first["run_id"]]  # no run made


def test_a_catalogued_game_that_is_missing_is_installed_before_play(tmp_path):
    from frobozz.cli._play import ensure_game
    from frobozz.games import GamesSettings
    from tests.conftest import ZORK1_R119

    settings = GamesSettings(games_dir=tmp_path / "empty", data_dir=tmp_path / "data")
    with serve({"/zork1.z3": (200, ZORK1_R119.read_bytes())}) as base:
        ensure_game("zork1-r119", settings, url=f"{base}/zork1.z3")
    assert (settings.installed_games_dir / "zork1-r119.z3").read_bytes() == ZORK1_R119.read_bytes()
    ensure_game("zork1-r119", settings, url="http://127.0.0.1:9/never-asked")  # already there: no download
    with pytest.raises(Exception, match="no game 'mygame'"):
        ensure_game("mygame", settings)


def test_memory_takes_a_namespace_or_none_as_a_bare_option_does():
    from frobozz.cli._app import bare_values

    assert bare_values(["zork1", "--memory", "--max-turns", "3"]) == ["zork1", "--memory=", "--max-turns", "3"]
    assert bare_values(["zork1", "--memory"]) == ["zork1", "--memory="]
    assert bare_values(["zork1", "--memory", "mine", "--json"]) == ["zork1", "--memory", "mine", "--json"]
    assert bare_values(["zork1", "--memory=mine"]) == ["zork1", "--memory=mine"]


def test_a_killed_memory_run_resumes_with_its_seen_set_and_recalls_nothing_twice(
    frobozz_env, tmp_path, cortex_settings, monkeypatch
):
    from frobozz.memory import MemoryService

    trophy = "In the Living Room, the trophy case holds the treasures you bring back."

    async def remember() -> int:
        service = MemoryService(cortex_settings)
        try:
            memory, _ = await (await service.store()).store(trophy, namespace="zork1")
            return memory.id
        finally:
            await service.aclose()

    memory_id = anyio.run(remember)
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    process = _start(tmp_path, "zork1", "--player", "walkthrough", "--memory", "--max-turns", "100", "--json")
    run_dir = _wait_for_turns(frobozz_env / "runs", 30)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    kept = len(run_dir.joinpath("turns.jsonl").read_text().splitlines())
    done = _play(tmp_path, "--resume", run_dir.name, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["turns"], result["memory_namespace"]) == (100, "zork1")
    turns = [json.loads(line) for line in run_dir.joinpath("turns.jsonl").read_text().splitlines()]
    shown = [t["turn"] for t in turns for line in t["recalled"] if line.startswith(f"[memory {memory_id}]")]
    assert len(shown) == 1 and shown[0] <= kept  # recalled before the kill, in the Living Room
    assert any(t["location"] == "Living Room" and t["turn"] > kept for t in turns)  # there again after: not repeated
    info = json.loads(run_dir.joinpath("run.json").read_text())
    assert info["memory_session"] and info["memories_recalled"] == sum(len(t["recalled"]) for t in turns)


@pytest.mark.parametrize("mode", ["text", "tools"])
def test_a_run_killed_with_sigkill_leaves_no_process_behind_and_resumes(frobozz_env, tmp_path, mode):
    process = _start(tmp_path, "zork1", "--player", "walkthrough", "--mode", mode, "--json")
    run_dir = _wait_for_turns(frobozz_env / "runs", 10)
    children = descendants(process.pid)
    assert any("claude" in " ".join(p.cmdline()) for p in children)
    os.kill(process.pid, signal.SIGKILL)  # the runner alone: what it started must go with it
    process.wait()
    assert still_running(children, within=5) == []
    done = _play(tmp_path, "--resume", run_dir.name, "--max-turns", "20", "--json")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["turns"], json.loads(done.stdout)["reason"]) == (20, "max turns")


def test_runs_at_80_columns_shows_each_run_whole_and_what_was_played_folds(tmp_path, monkeypatch):
    """Eleven columns at 80 were two or three characters each ('ro / ut / in / e:'), the status and cost split."""
    from frobozz.cli import _runs as runs_cli

    env = _env(tmp_path)
    played = [
        json.loads(frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", *more, "--json").stdout)
        for more in (["--max-turns", "3"], ["--max-turns", "2", "--mode", "tools"])
    ]
    monkeypatch.setattr(runs_cli.out, "width", 80)  # (made when first imported, as wide as COLUMNS was then)
    lines = frobozz_here(env, monkeypatch, "runs").stdout.splitlines()
    assert max(map(len, lines)) <= 80
    for run, mode in zip(played, ("text", "tools"), strict=True):
        (line,) = [line for line in lines if run["run_id"] in line]
        row = line.split()
        assert row[0] == run["run_id"] and row[-4:] == ["finished", f"{run['score']}/350", str(run["turns"]), "$0.0000"]
        assert f"zork1 ({mode})," in line
    assert "walkthrough" in " ".join(lines) and "max turns" in " ".join(lines)


def test_a_resume_refuses_other_options_than_the_runs_and_says_a_turn_limit_below_its_turns_is(
    frobozz_env, tmp_path, monkeypatch
):
    """A different GAME, --player (auto too), --mode, --multi or --memory was ignored without a word (`--player
    auto` even said "playing with walkthrough"); a --max-turns below the turns played said "is finished
    (interrupted, 221 of 160 turns)". The run's own options said again, and a raised budget, still go on."""
    env = _env(tmp_path)
    first = json.loads(
        frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--json").stdout
    )
    run_id, run_dir = first["run_id"], frobozz_env / "runs" / first["run_id"]
    before = (run_dir / "run.json").read_bytes()

    def refused(*args: str) -> str:
        done = frobozz_here(env, monkeypatch, "play", *args, "--resume", run_id, "--max-turns", "9", code=1)
        assert "playing with" not in done.stderr
        return " ".join(done.stderr.split())

    said = refused("zork2", "--player", "claude", "--mode", "tools", "--multi", "--memory", "")  # (bare: the CLI's)
    for option in (
        "GAME zork2 (it plays zork1)",
        "--player claude (it plays with walkthrough)",
        "--mode tools (it plays in text mode)",
        "--multi (it plays one command a reply)",
        "--memory (it plays without memory)",
    ):
        assert option in said
    assert "leave those out" in said and "--max-turns" in said
    assert "--player auto (it plays with walkthrough)" in refused("--player", "auto")
    low = frobozz_here(env, monkeypatch, "play", "--resume", run_id, "--max-turns", "2", code=1)
    said = " ".join(low.stderr.split())
    assert "has played 3 turns already, so --max-turns 2 leaves it nothing to play" in said
    assert "pass one above 3" in said and "of 2 turns" not in said
    assert (run_dir / "run.json").read_bytes() == before  # nothing refused was written

    same = ("zork1", "--player", "walkthrough", "--mode", "text", "--no-multi", "--resume", run_id)
    more = json.loads(frobozz_here(env, monkeypatch, "play", *same, "--max-turns", "5", "--json").stdout)
    assert (more["run_id"], more["turns"], more["reason"]) == (run_id, 5, "max turns")


def test_a_resume_of_a_run_a_worker_played_here_is_refused_saying_the_worker_plays_it(
    frobozz_env, tmp_path, monkeypatch
):
    """Such a run's record is the queue's database (the embedded one by default, which plain play does not
    record in): a resume here played it, the database still said `queued, 300 turns`, and the next worker played
    it on from there. The worker marks its run's directory, so this holds with no database configured."""
    from frobozz.runner._opening import mark_queued

    env = _env(tmp_path)
    first = json.loads(
        frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "2", "--json").stdout
    )
    run_dir = frobozz_env / "runs" / first["run_id"]
    mark_queued(RunStore.open(frobozz_env / "runs", first["run_id"]))  # as a worker's checkout of it here does
    before = (run_dir / "run.json").read_bytes()
    done = frobozz_here(env, monkeypatch, "play", "--resume", first["run_id"], "--max-turns", "4", code=1)
    said = " ".join(done.stderr.split())
    assert f"run {first['run_id']} belongs to the queue" in said and "`frobozz worker` plays it" in said
    assert (run_dir / "run.json").read_bytes() == before and len(
        (run_dir / "turns.jsonl").read_text().splitlines()
    ) == 2


def test_a_claude_run_killed_and_resumed_costs_what_the_model_billed_turn_by_turn_and_in_all(frobozz_env, tmp_path):
    """The model bills every request alike, and a claude turn here is one request: each played turn costs the same.
    A run stopped at --max-turns 3 leaves claude's running total saved in its transcript (a graceful exit); the
    resumed stretch is killed with -9 while its sixth turn is asked, so the total it reached is saved nowhere. The
    next resume's claude carries on from the saved total, not from what the run says it spent: counted from the
    run's cost, its first turn was billed $0 or several turns at once, and the run's total with it."""
    commands = ["open mailbox", "read leaflet", "drop leaflet", "s", "e", "open window", "enter", "w", "e", "up"]
    asked, release, held = threading.Event(), threading.Event(), []

    def model(request):
        n = turn_in(request.last_user_text())
        if n == 6 and not held:  # the killed stretch's sixth turn: asked, never answered
            held.append(n)
            asked.set()
            release.wait(120)
        return f"<command>{commands[(n or 1) - 1]}</command>"

    with ScriptedModel(model) as api:
        env = _env(tmp_path, **api.env())
        first = _play(tmp_path, "zork1", "--max-turns", "3", "--json", env=env)
        assert first.returncode == 0, first.stderr
        run_id = json.loads(first.stdout)["run_id"]
        process = subprocess.Popen(
            [sys.executable, "-m", "frobozz", "play", "--resume", run_id, "--max-turns", "10", "--json"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        try:
            assert asked.wait(120), "the sixth turn was never asked"
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # the runner and its claude: no total saved
            process.wait()
            release.set()
        done = _play(tmp_path, "--resume", run_id, "--max-turns", "8", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    turns = [json.loads(line) for line in (frobozz_env / "runs" / run_id / "turns.jsonl").read_text().splitlines()]
    assert [t["turn"] for t in turns] == list(range(1, 9)) and result["turns"] == 8
    totals = [0.0] + [t["cost_usd"] for t in turns]
    each = [round(after - before, 6) for before, after in itertools.pairwise(totals)]
    assert each[0] > 0 and each == [each[0]] * 8, each
    assert round(result["cost_usd"], 6) == round(8 * each[0], 6)
