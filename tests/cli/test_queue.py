"""Runs at scale as a user runs them: `play --queue`, `frobozz worker` processes on one database (real
Postgres, the real claude CLI with the walkthrough player), `frobozz runs` and `frobozz leaderboard`."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from functools import partial

import anyio
import pytest

from tests.cli.in_process import frobozz_here
from tests.orphans import descendants, still_running

WALKTHROUGH_TURNS = 396  # zork1's walkthrough, played to 350/350
# A wait that gives up says why, with what the workers logged (INFO: what each was doing), before the test's
# own timeout takes its pytest worker down with nothing said: a test's waits, its workers' stops (a minute
# each at most) and its commands, all added up, stay inside it
pytestmark = pytest.mark.timeout(900)
WAIT, LONG_WAIT = 180, 300


@pytest.fixture
def queue_env(tmp_path, frobozz_env, cortex_settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    (tmp_path / "home").mkdir(exist_ok=True)
    env.update(
        HOME=str(tmp_path / "home"),
        FROBOZZ_DATABASE_URL=cortex_settings.database_url.get_secret_value(),
        FROBOZZ_WORKER_HEARTBEAT="2",
    )
    return env


def frobozz(env, *args, check=True, timeout=120):
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", *args], capture_output=True, text=True, env=env, timeout=timeout
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def start_worker(env, *args, data_dir=None):
    """A worker process in its own process group (on its own "machine" when `data_dir` is given). Its output goes
    to files, not pipes: a pipe nobody reads until the end stops a worker that writes more than it holds."""
    env = {"FROBOZZ_LOG_LEVEL": "INFO", **env, **({"FROBOZZ_DATA_DIR": str(data_dir)} if data_dir else {})}
    files = (tempfile.TemporaryFile(), tempfile.TemporaryFile())
    worker = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "worker", *args],
        stdout=files[0],
        stderr=files[1],
        env=env,
        start_new_session=True,
    )
    worker.output_files = files  # its stdout and stderr: `output` reads them, `forget` closes them
    return worker


def output(worker) -> tuple[str, str]:
    """What the worker printed so far: its stdout and stderr (read without moving the offset it writes at)."""
    texts = []
    for file in worker.output_files:
        fd = file.fileno()
        texts.append(os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace"))
    return texts[0], texts[1]


def psql(env, sql):
    """Rows straight from the database (a poll much quicker than a `frobozz runs` process), or a change."""
    import asyncpg

    async def run():
        connection = await asyncpg.connect(env["FROBOZZ_DATABASE_URL"])
        try:
            return [dict(r) for r in await connection.fetch(sql)]
        finally:
            await connection.close()

    return anyio.run(run)


def runs(env, monkeypatch, *args):
    return json.loads(frobozz_here(env, monkeypatch, "runs", "--json", *args).stdout)


def shown(env, monkeypatch, run_id):
    """`runs show RUN_ID --json`, in this process: one of this file's tests runs `runs show` as a process."""
    return json.loads(frobozz_here(env, monkeypatch, "runs", "show", run_id, "--json").stdout)


def queue_walkthroughs(env, *args, monkeypatch=None):
    """The ids of the zork1 walkthrough runs `play --queue ARGS` queued (in this process, given `monkeypatch`)."""
    args = ("play", "zork1", "--player", "walkthrough", "--queue", *args, "--json")
    done = frobozz_here(env, monkeypatch, *args) if monkeypatch else frobozz(env, *args)
    return json.loads(done.stdout)


def finished(env):
    """The finished runs' ids, for a wait: a `frobozz runs` process every quarter second was a Python start
    each, taking the CPU from the workers it waited on (what `runs` shows is checked after the wait). A run
    that failed fails the wait at once, with its reason: it would never finish."""
    ended = psql(env, "SELECT run_id, status, reason FROM runs WHERE status IN ('finished', 'failed')")
    assert all(r["status"] == "finished" for r in ended), [r for r in ended if r["status"] == "failed"]
    return [{"run_id": r["run_id"]} for r in ended]


def wait_until(check, timeout=WAIT, workers=()):
    """`check()`'s first true answer; fails at once, with what it printed, if one of `workers` has ended."""
    deadline = time.monotonic() + timeout

    def printed() -> str:
        return "".join(f"\nworker {w.pid}: {output(w)[1][-4000:]}" for w in workers)

    while time.monotonic() < deadline:
        try:
            found = check()
        except AssertionError as e:  # (a run failed: it will never finish)
            raise AssertionError(f"{e}{printed()}") from e
        if found:
            return found
        for worker in workers:
            if worker.poll() is not None:
                raise AssertionError(f"worker {worker.pid} ended ({worker.returncode}): {output(worker)[1][-4000:]}")
        time.sleep(0.25)
    raise AssertionError(f"gave up waiting{printed()}")


def stop(worker):
    """SIGTERM, and its stdout once it has ended (its process group killed if it has not within a minute)."""
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)  # its group: its claude and game server too
        worker.wait()
    out, err = output(worker)
    forget(worker)
    assert worker.returncode == 0, err
    return out


def stop_all(workers) -> list[str]:
    """Each worker stopped, even when stopping one fails; their stdouts."""
    outs, failures = [], []
    for worker in workers:
        try:
            outs.append(stop(worker))
        except Exception as e:  # noqa: BLE001 - the next workers are stopped all the same; all failures reported
            failures.append(repr(e))
    assert not failures, failures
    return outs


def forget(worker) -> None:
    """Close an ended worker's output files."""
    for file in worker.output_files:
        file.close()


def test_runs_and_the_leaderboard_on_an_empty_database_say_so(queue_env, monkeypatch):
    """The first `runs` is a real process; the other calls run in this one (`frobozz_here`)."""
    assert "no runs yet" in frobozz(queue_env, "runs").stdout
    here = partial(frobozz_here, queue_env, monkeypatch)
    assert json.loads(here("runs", "--json").stdout) == []
    assert json.loads(here("runs", "--json", "--status", "finished", "--game", "zork1").stdout) == []
    assert "no finished runs yet" in here("leaderboard").stdout
    assert json.loads(here("leaderboard", "--json").stdout) == []
    missing = here("runs", "show", "20261122-013000-a1b2c3", code=1)
    assert "no run '20261122-013000-a1b2c3'" in missing.stderr
    here("runs", "--status", "bogus", code=2)
    assert "no run '[/x]'" in here("runs", "show", "[/x]", code=1).stderr  # (a markup error before)
    hostile = "x'; DROP TABLE runs; --" + "\u202e" * 5000
    refused = here("runs", "show", hostile, code=1)
    assert "no run" in refused.stderr and len(refused.stderr) < 500
    assert json.loads(here("runs", "--json", "--game", hostile, "--model", hostile).stdout) == []
    assert json.loads(here("leaderboard", "--json", "--game", hostile).stdout) == []
    assert frobozz(queue_env, "worker", "--concurrency", "0", check=False).returncode == 2


def test_a_database_that_cannot_be_reached_is_a_clear_error_for_every_queue_command(queue_env, monkeypatch):
    """`worker` is a real process (the one that would keep running); the others run in this one."""
    env = {**queue_env, "FROBOZZ_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    for args in (
        ["play", "zork1", "--player", "walkthrough", "--queue"],
        ["runs"],
        ["runs", "show", "x"],
        ["leaderboard"],
    ):
        assert "cannot reach the database" in frobozz_here(env, monkeypatch, *args, code=1).stderr, args
    done = frobozz(env, "worker", check=False)
    assert done.returncode == 1 and "cannot reach the database" in done.stderr, done.stderr


def test_bad_queue_arguments_are_clear_errors_and_queue_nothing(queue_env, monkeypatch):
    """The first case is a real process; the others run in this one (`frobozz_here`)."""
    for n, (args, code, message) in enumerate(
        [
            (["nosuchgame"], 1, "no game 'nosuchgame'"),
            (["zork1", "--player", "nobody"], 2, "unknown player"),
            (["zork1", "--player", "script:/nonexistent/file"], 1, "cannot read the script"),
            (["zork1", "--resume", "20261122-013000-a1b2c3"], 2, "starts afresh"),
            (["zork1", "--runs", "0"], 2, "runs"),
            (["zork1", "--runs", "100000"], 2, "runs"),
            (["zork1", "--memory", "bad namespace!"], 2, "not a namespace"),
        ]
    ):
        player = [] if "--player" in args else ["--player", "walkthrough"]
        if n == 0:
            done = frobozz(queue_env, "play", "--queue", *player, *args, check=False)
            assert done.returncode == code and message in done.stderr + done.stdout, (args, done.stderr)
        else:
            done = frobozz_here(queue_env, monkeypatch, "play", "--queue", *player, *args, code=code)
            assert message in done.stderr + done.stdout, (args, done.output)
    assert runs(queue_env, monkeypatch) == []


def test_a_worker_with_no_game_it_can_find_refuses_to_start(queue_env):
    done = frobozz(queue_env, "worker", "--games", "nosuchgame", check=False)
    assert done.returncode == 1 and "no game 'nosuchgame'" in done.stderr
    assert frobozz(queue_env, "worker", "--games", " , ", check=False).returncode == 2


def test_six_queued_runs_on_two_workers_are_each_played_once_to_their_end_and_make_the_leaderboard(
    queue_env, tmp_path, monkeypatch
):
    """One run is a full game won (350 in 396 turns); five are cut at 40 turns. Six runs on two workers of two
    slots each: both workers play, two runs at once in one worker, and a freed slot takes the next. The
    leaderboard aggregates unequal runs. (Six full games proved the same at three times the CPU.) Eight commands
    a reply (--multi), which the queue keeps with each run: the same turns in an eighth of claude's."""
    (won,) = queue_walkthroughs(queue_env, "--multi")
    short = queue_walkthroughs(queue_env, "--runs", "5", "--max-turns", "40", "--multi", monkeypatch=monkeypatch)
    ids = [won, *short]
    assert len(set(ids)) == 6 and {r["status"] for r in runs(queue_env, monkeypatch)} == {"queued"}
    workers = [start_worker(queue_env, "--concurrency", "2", data_dir=tmp_path / f"machine{i}") for i in (1, 2)]
    try:
        wait_until(lambda: len(finished(queue_env)) == 6, timeout=LONG_WAIT, workers=workers)
    finally:
        outs = stop_all(workers)
    played = [line.split()[1].rstrip(":") for out in outs for line in out.splitlines() if line.startswith("run ")]
    assert sorted(played) == sorted(ids)  # each run played to its end by one worker, once
    assert all(out.strip() for out in outs)  # both workers played
    show = shown(queue_env, monkeypatch, won)
    assert set(show["files"]) == {"transcript.md", "score.png", "map.png"} and show["last_turn"]["turn"] == 396
    lines = [json.loads(line) for line in open(os.path.join(show["run_dir"], "turns.jsonl"))]
    at_40 = lines[39]["score"]  # what a run cut at 40 turns has: the same game, played alongside others
    assert 0 < at_40 < 350
    for run in runs(queue_env, monkeypatch):
        expected = (350, True, WALKTHROUGH_TURNS, "won") if run["run_id"] == won else (at_40, False, 40, "max turns")
        assert (run["score"], run["won"], run["turns"], run["reason"]) == expected
    board = json.loads(frobozz_here(queue_env, monkeypatch, "leaderboard", "--json").stdout)
    assert board == [
        {
            "model": "",
            "player": "walkthrough",
            "game": "zork1",
            "mode": "text",
            "runs": 6,
            "mean_score": round((350 + 5 * at_40) / 6, 2),
            "best_score": 350,
            "max_score": 350,
            "wins": 1,
            "mean_turns": round((WALKTHROUGH_TURNS + 5 * 40) / 6, 1),
            "cost_usd": 0.0,
            "cost_per_point": 0.0,
        }
    ]
    assert "zork1" in frobozz(queue_env, "leaderboard").stdout
    assert json.loads(frobozz_here(queue_env, monkeypatch, "leaderboard", "--json", "--game", "zork2").stdout) == []


@pytest.mark.parametrize("mode, turns", [("text", 80), ("tools", 45)])
def test_a_worker_killed_mid_run_leaves_it_to_another_machine_which_ends_it_as_if_uninterrupted(
    queue_env, tmp_path, monkeypatch, mode, turns
):
    """In tools mode the game itself is taken up too: the game server's session is shared in the database; its
    runs make eight acts a message (--multi), so the kill may come between two of one message's."""
    several = ["--multi"] if mode == "tools" else []
    first, second = queue_walkthroughs(
        queue_env, "--runs", "2", "--mode", mode, "--max-turns", str(turns), *several, monkeypatch=monkeypatch
    )
    doomed = start_worker(queue_env, data_dir=tmp_path / "machine1")  # takes one run at a time
    try:
        taken = wait_until(
            lambda: next(
                iter(psql(queue_env, "SELECT run_id, turns FROM runs WHERE turns >= 15 AND status = 'running'")), None
            ),
            workers=[doomed],
        )
        children = descendants(doomed.pid)
    finally:
        doomed.kill()  # SIGKILL (not os.kill: a wait may have reaped it already)
        doomed.wait()
        forget(doomed)
    killed_at = datetime.now(UTC).isoformat(timespec="seconds")
    assert still_running(children, within=5) == []
    cut = taken["turns"]
    if mode == "tools":  # as when the game answered an act the record had not yet committed: the game is ahead
        psql(
            queue_env,
            f"DELETE FROM run_turns WHERE run_id = '{taken['run_id']}' AND turn = "
            f"(SELECT max(turn) FROM run_turns WHERE run_id = '{taken['run_id']}')",
        )
        cut -= 1
    session = shown(queue_env, monkeypatch, taken["run_id"])["info"]["claude_session_id"]
    (tmp_path / "home2").mkdir()
    survivor = start_worker(
        {**queue_env, "HOME": str(tmp_path / "home2")}, "--concurrency", "2", data_dir=tmp_path / "machine2"
    )  # another machine: its own HOME and data
    try:
        wait_until(lambda: len(finished(queue_env)) == 2, timeout=LONG_WAIT, workers=[survivor])
    finally:
        out = stop(survivor)
    assert sorted(line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("run ")) == sorted(
        [first, second]
    )
    finals = {}
    for run_id in (first, second):
        show = shown(queue_env, monkeypatch, run_id)
        assert show["run_dir"].startswith(str(tmp_path / "machine2"))
        lines = [json.loads(line) for line in open(os.path.join(show["run_dir"], "turns.jsonl"))]
        assert [t["turn"] for t in lines] == list(range(1, turns + 1))  # not a turn twice
        finals[run_id] = (
            show["score"],
            show["won"],
            show["turns"],
            lines[-1]["moves"],
            lines[-1]["location"],
            lines[-1]["text"],
        )
        if run_id == taken["run_id"]:  # taken up where the database had it, not played again from the start
            assert all(t["at"] <= killed_at for t in lines[:cut]) and lines[-1]["at"] >= killed_at
            # machine1's claude transcript is not here, but the database has it: the same claude session goes on
            assert session and show["info"]["claude_session_id"] == session
            stored = [
                json.loads(r["entry"])
                for r in psql(
                    queue_env,
                    (
                        f"SELECT entry::text FROM claude_transcript_entries WHERE project_key = 'frobozz-run-{run_id}' "
                        f"AND session_id = '{session}' AND subpath = '' ORDER BY seq"
                    ),
                )
            ]
            by_uuid = {e["uuid"]: e for e in stored if e.get("uuid")}
            told = next(
                e for e in stored if e.get("type") == "user" and "was stopped and has" in json.dumps(e["message"])
            )
            chain, entry = [], told  # the request after the kill is built on this chain: the turns before it
            while entry.get("parentUuid") in by_uuid:
                entry = by_uuid[entry["parentUuid"]]
                chain.append(entry)
            assert len([e for e in chain if e.get("timestamp", "")[:19] <= killed_at[:19]]) >= cut
    assert finals[taken["run_id"]] == finals[second if taken["run_id"] == first else first]
    assert finals[first][2] == turns and taken["turns"] >= 15


def test_a_stopped_worker_puts_its_runs_back_and_the_next_goes_on_with_the_same_claude_session(
    queue_env, tmp_path, monkeypatch
):
    (run_id,) = queue_walkthroughs(queue_env, "--max-turns", "120", monkeypatch=monkeypatch)
    worker = start_worker(queue_env, data_dir=tmp_path / "machine")
    try:  # early: the run has far to go
        wait_until(lambda: psql(queue_env, "SELECT turns FROM runs")[0]["turns"] >= 5, workers=[worker])
    finally:
        out = stop(worker)
    assert "run " not in out  # SIGTERM: the run in hand stopped at a turn, and was not finished
    (stopped,) = runs(queue_env, monkeypatch)
    assert stopped["status"] == "queued" and stopped["turns"] >= 5
    session = shown(queue_env, monkeypatch, run_id)["info"]["claude_session_id"]
    worker = start_worker(queue_env, data_dir=tmp_path / "machine")
    try:
        wait_until(lambda: finished(queue_env), workers=[worker])
    finally:
        assert f"run {run_id}: max turns" in stop(worker)
    show = shown(queue_env, monkeypatch, run_id)
    assert show["info"]["claude_session_id"] == session  # its transcript is on this machine: resumed
    lines = [json.loads(line) for line in open(os.path.join(show["run_dir"], "turns.jsonl"))]
    assert [t["turn"] for t in lines] == list(range(1, 121)) and show["turns"] == 120


def test_a_run_played_here_with_a_database_configured_is_listed_and_ranked_too(queue_env, monkeypatch):
    """`runs show` and `leaderboard` are real processes here once each; the other reads run in this one."""
    result = json.loads(
        frobozz(queue_env, "play", "zork1", "--player", "walkthrough", "--max-turns", "10", "--json").stdout
    )
    (run,) = runs(queue_env, monkeypatch)
    assert (run["run_id"], run["status"], run["reason"], run["turns"], run["score"]) == (
        result["run_id"],
        "finished",
        "max turns",
        10,
        result["score"],
    )
    (row,) = json.loads(frobozz(queue_env, "leaderboard", "--json").stdout)
    assert (row["runs"], row["best_score"], row["mean_turns"]) == (1, result["score"], 10.0)
    shown_here = frobozz_here({**queue_env, "COLUMNS": "200"}, monkeypatch, "runs", "show", result["run_id"]).stdout
    assert "none: played where it was started, not queued" in shown_here  # a finished run was "(not taken yet)"
    away = {**queue_env, "FROBOZZ_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    done = frobozz(away, "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--json")
    assert json.loads(done.stdout)["turns"] == 3 and "not recorded in the database" in done.stderr
    here = json.loads(done.stdout)["run_id"]  # played on this machine only: it counts everywhere all the same
    assert [r["run_id"] for r in runs(queue_env, monkeypatch)] == [here, result["run_id"]]
    assert here in frobozz_here(queue_env, monkeypatch, "runs").stdout
    show = shown(queue_env, monkeypatch, here)
    assert (show["run_id"], show["turns"], show["last_turn"]["turn"]) == (here, 3, 3)
    assert "transcript.md" in show["files"] and "not in the database" in frobozz(queue_env, "runs", "show", here).stdout
    (row,) = json.loads(frobozz_here(queue_env, monkeypatch, "leaderboard", "--json").stdout)
    assert (row["runs"], row["mean_turns"]) == (2, 6.5)


def test_what_a_user_named_is_listed_as_it_is_not_as_markup(queue_env, monkeypatch):
    """A model named 'opus[/x]' ended runs, runs show and the leaderboard in a markup error."""
    frobozz_here(
        queue_env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "1", "--model", "opus[/x]"
    )
    run_id = runs(queue_env, monkeypatch)[0]["run_id"]
    from frobozz.cli import _runs

    monkeypatch.setattr(_runs.out, "width", 200)  # the command's console (made at import): no cell folded
    for args in (["runs"], ["runs", "show", run_id], ["leaderboard"]):
        listed = frobozz_here(queue_env, monkeypatch, *args).stdout
        assert "opus[/x]" in listed, (args, listed)


def test_play_resume_on_a_machine_with_only_the_database_goes_on_in_the_same_claude_session(
    queue_env, tmp_path, monkeypatch
):
    first = {**queue_env, "FROBOZZ_DATA_DIR": str(tmp_path / "machine1")}
    result = json.loads(frobozz(first, "play", "zork1", "--player", "walkthrough", "--max-turns", "8", "--json").stdout)
    session = shown(first, monkeypatch, result["run_id"])["info"]["claude_session_id"]
    (tmp_path / "home2").mkdir()
    second = {**queue_env, "FROBOZZ_DATA_DIR": str(tmp_path / "machine2"), "HOME": str(tmp_path / "home2")}
    assert not (tmp_path / "machine2").exists()  # neither the run's directory nor its claude transcript is here
    resumed = json.loads(frobozz(second, "play", "--resume", result["run_id"], "--max-turns", "16", "--json").stdout)
    assert (resumed["run_id"], resumed["turns"]) == (result["run_id"], 16)
    assert shown(second, monkeypatch, result["run_id"])["info"]["claude_session_id"] == session
    lines = [json.loads(line) for line in open(tmp_path / "machine2" / "runs" / result["run_id"] / "turns.jsonl")]
    assert [t["turn"] for t in lines] == list(range(1, 17))  # rebuilt from the database, then played on
    done = frobozz(second, "play", "--resume", "no-such-run", check=False)
    assert done.returncode == 1 and "no-such-run" in done.stderr and "Traceback" not in done.stderr
