"""The run queue in-process: the runs' tables on nothing, and a worker whose database goes away mid-run
(real Postgres, the real claude CLI with the walkthrough player)."""

import json

import anyio
import asyncpg
import pytest

from frobozz.engine import find_claude
from frobozz.runner import (
    PlayerError,
    ResumeError,
    RunConfig,
    RunLedger,
    RunNotFoundError,
    RunStore,
    Worker,
    _queue,
    all_runs,
    enqueue,
    play,
    run_row,
)
from frobozz.runner._queue import ATTEMPTS
from frobozz.runner._run import new_info
from tests.database import database_name
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_the_runs_tables_on_nothing_have_no_runs_no_turns_and_no_leaderboard(ledger):
    assert await ledger.runs() == [] and await ledger.runs(game="zork1", model="x", status="finished") == []
    assert await ledger.leaderboard() == [] and await ledger.leaderboard(game="zork1") == []
    assert await ledger.turns("20261122-013000-a1b2c3") == []
    with pytest.raises(RunNotFoundError, match="no run"):
        await ledger.get("20261122-013000-a1b2c3")


async def test_a_run_whose_database_goes_away_stops_where_it_was_and_is_played_to_its_end_once_it_is_back(
    ledger, runner_settings, postgres, cortex_settings, monkeypatch
):
    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "2")
    settings = type(runner_settings)()
    name = database_name(cortex_settings)
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=60), settings, 1)
    worker = Worker(ledger, settings)
    admin = await asyncpg.connect(postgres.get_uri())
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            with anyio.fail_after(120):

                async def ready() -> object:
                    return (await ledger.get(run_id))["turns"] >= 10

                await eventually(ready)
            await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
            local = settings.runs_dir / run_id / "run.json"
            with anyio.fail_after(60):
                await eventually(lambda: "database went away" in (json.loads(local.read_text()).get("reason") or ""))
            kept = len((settings.runs_dir / run_id / "turns.jsonl").read_text().splitlines())
            await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
            with anyio.fail_after(180):

                async def ready() -> object:
                    return (await ledger.get(run_id))["status"] == "finished"

                await eventually(ready, interval=0.1)
            worker.stop()
    finally:
        await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
        await admin.close()
    assert kept >= 10 and worker.played == [run_id]
    assert [t.turn for t in await ledger.turns(run_id)] == list(range(1, 61))  # none lost, none twice
    assert (await ledger.get(run_id))["reason"] == "max turns"


async def test_the_leaderboard_s_figures_are_the_runs_own_results(ledger, runner_settings):
    import random
    import statistics

    rng = random.Random(7)
    for model in ("claude-a", "claude-b", None):
        for mode in ("text", "tools"):
            for _ in range(rng.randint(1, 4)):
                info = new_info(RunConfig(game="zork1", player="walkthrough", mode=mode, model=model), runner_settings)
                await ledger.add(info)
                info.status = rng.choice(["finished", "finished", "finished", "stopped", "failed"])
                info.score, info.max_score = rng.choice([0, 10, 35, 350]), 350
                info.won, info.turns, info.cost_usd = info.score == 350, rng.randint(5, 400), rng.random()
                await ledger.save(info)
    rows = await ledger.runs(limit=1000)
    board = await ledger.leaderboard()
    ended = [r for r in rows if r["status"] == "finished"]
    groups = {(r["model"] or "", r["player"], r["game"], r["mode"]) for r in ended}
    assert {(b["model"], b["player"], b["game"], b["mode"]) for b in board} == groups
    for b in board:
        mine = [
            r
            for r in ended
            if (r["model"] or "", r["player"], r["game"], r["mode"]) == (b["model"], b["player"], b["game"], b["mode"])
        ]
        scores = [r["score"] for r in mine]
        assert b["runs"] == len(mine) and b["wins"] == sum(r["won"] for r in mine)
        assert b["mean_score"] == pytest.approx(statistics.mean(scores), abs=0.005) and b["best_score"] == max(scores)
        assert b["mean_turns"] == pytest.approx(statistics.mean(r["turns"] for r in mine), abs=0.05)
        cost = sum(r["cost_usd"] for r in mine)
        assert b["cost_usd"] == pytest.approx(cost, abs=1e-6)
        assert b["cost_per_point"] == (None if not sum(scores) else pytest.approx(cost / sum(scores), abs=1e-6))
    means = [b["mean_score"] for b in board]
    assert means == sorted(means, reverse=True)
    assert await ledger.leaderboard(game="zork2") == []


def claude_failing_first(tmp_path, failures: int) -> str:
    """A claude that fails to start its first `failures` times (exit 1, saying so on stderr), then is the real
    one; `--version` is always the real one's answer."""
    real, starts = find_claude(None), tmp_path / "starts"
    script = tmp_path / "bin" / "claude"
    script.parent.mkdir()
    script.write_text(f"""#!/bin/sh
for arg in "$@"; do [ "$arg" = --version ] && exec "{real}" "$@"; done
n=$(cat "{starts}" 2>/dev/null || echo 0); echo $((n + 1)) > "{starts}"
if [ "$n" -lt {failures} ]; then echo "claude cannot start (failure $((n + 1)))" >&2; exit 1; fi
exec "{real}" "$@"
""")
    script.chmod(0o755)
    return str(script)


async def worked_until_ended(worker: Worker, ledger, run_id: str) -> dict:
    """The worker run until the run has finished or failed, then stopped (all within two minutes); its row."""

    async def ended() -> object:
        return (await ledger.get(run_id))["status"] in ("finished", "failed")

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await eventually(ended, interval=0.1)
            worker.stop()
    return await ledger.get(run_id)


async def test_a_run_of_the_queue_is_refused_by_a_resume_with_or_without_the_database_and_left_as_it_was(
    ledger, runner_settings
):
    """`play --resume` of a worker's run played it here, recorded where plain play records (nowhere, unless
    FROBOZZ_DATABASE_URL is set), while the queue's database kept its record, and a worker played on from that."""
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=2), runner_settings, 1)
    assert (await worked_until_ended(Worker(ledger, runner_settings), ledger, run_id))["turns"] == 2
    run_dir = runner_settings.runs_dir / run_id
    before = (run_dir / "run.json").read_bytes()
    for with_ledger in (None, ledger):  # marked by the worker that played it here / a job in the database
        with pytest.raises(ResumeError, match=rf"run {run_id} belongs to the queue.*`frobozz worker` plays it"):
            await play(RunConfig(resume=run_id, max_turns=4), runner_settings, ledger=with_ledger)
    (run_dir / "queued").unlink()  # as on a machine where no worker played it: the database says so
    with pytest.raises(ResumeError, match="belongs to the queue"):
        await play(RunConfig(resume=run_id, max_turns=4), runner_settings, ledger=ledger)
    assert (run_dir / "run.json").read_bytes() == before and len(RunStore.open(run_dir.parent, run_id).turns()) == 2
    row = await ledger.get(run_id)
    assert (row["status"], row["turns"]) == ("finished", 2)


@pytest.mark.parametrize("failures", [1, 10])
async def test_a_run_whose_claude_fails_to_start_is_tried_again_then_failed_never_left_running(
    ledger, runner_settings, tmp_path, monkeypatch, failures
):
    """pgqueuer drops the job of a handler that raised: before, such a run stayed `running` with no job, and no
    worker ever took it again. Now it goes back to the queue, and after ATTEMPTS errors it is failed."""
    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "1")  # how often an idle worker looks for a job come due
    monkeypatch.setenv("FROBOZZ_WORKER_RETRY", "0.2")  # tried again 0.2 s, then 0.4 s, after an error
    settings = type(runner_settings)()
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=5), settings, 1)
    worker = Worker(ledger, settings, cli_path=claude_failing_first(tmp_path, failures))
    run = await worked_until_ended(worker, ledger, run_id)
    info = await ledger.info(run_id)
    if failures < ATTEMPTS:
        assert (run["status"], run["reason"], run["turns"], info.errors) == ("finished", "max turns", 5, failures)
        assert worker.played == [run_id]
    else:
        assert run["status"] == "failed" and info.errors == ATTEMPTS and worker.played == []
        assert run["reason"].startswith(f"stopped on an error {ATTEMPTS} times; the last: ")
        assert "claude cannot start (failure 3)" in run["reason"]
        local = json.loads((settings.runs_dir / run_id / "run.json").read_text())
        assert (local["status"], local["reason"]) == ("failed", run["reason"])  # this machine's record agrees
        assert (tmp_path / "starts").read_text().strip() == str(ATTEMPTS)  # three plays, no more, then failed


@pytest.mark.parametrize(
    "raised, reason, plays",
    [  # an OSError is no sign of the database's going: it was taken for one, and the run played again at once,
        # for ever; a player's error inside a task group's group was taken for a worker's error and played again
        (
            lambda: TimeoutError("a bound ran out"),
            f"stopped on an error {ATTEMPTS} times; the last: TimeoutError: a bound ran out",
            ATTEMPTS,
        ),
        (
            lambda: ExceptionGroup("unhandled errors in a TaskGroup", [PlayerError("claude is not logged in")]),
            "claude is not logged in",
            1,
        ),
    ],
    ids=["a timeout", "a player error in a group"],
)
async def test_a_run_whose_play_raises_is_failed_with_the_error_that_says_what_happened(
    ledger, runner_settings, monkeypatch, raised, reason, plays
):
    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "1")
    monkeypatch.setenv("FROBOZZ_WORKER_RETRY", "0.2")  # tried again 0.2 s, then 0.4 s, after an error
    settings = type(runner_settings)()
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=5), settings, 1)
    played = []

    async def failing(*args, **kwargs):
        played.append(args)
        raise raised()

    monkeypatch.setattr(_queue, "play", failing)
    run = await worked_until_ended(Worker(ledger, settings), ledger, run_id)
    assert (run["status"], run["reason"], len(played)) == ("failed", reason, plays)
    local = json.loads((settings.runs_dir / run_id / "run.json").read_text())
    assert (local["status"], local["reason"]) == ("failed", reason)


async def test_a_worker_told_to_stop_while_a_failed_run_waits_for_its_database_stops(
    ledger, runner_settings, postgres, cortex_settings, monkeypatch, caplog
):
    """The run stays as the database had it (its job goes to another worker once this one's heartbeat ends);
    before, the worker waited for the database for ever."""
    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "2")
    settings = type(runner_settings)()
    name = database_name(cortex_settings)
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=5), settings, 1)
    admin = await asyncpg.connect(postgres.get_uri())

    async def failing(*args, **kwargs):  # the run stops on an error, and its database goes away with it
        await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
        await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
        raise RuntimeError("a bug")

    monkeypatch.setattr(_queue, "play", failing)
    worker = Worker(ledger, settings)
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run)
                await eventually(lambda: "waits for its database" in caplog.text)
                worker.stop()
    finally:
        await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
        await admin.close()
    # as the database had it (the stand-in play never marked it running), not failed, not played
    assert (await ledger.get(run_id))["status"] == "queued" and (await ledger.info(run_id)).errors == 0
    assert worker.played == []


async def test_a_run_on_a_worker_whose_disk_is_full_is_failed_after_its_attempts_not_queued_for_ever(
    ledger, runner_settings, monkeypatch
):
    """Its directory here cannot be written, not even to say it failed: that is no database error (an OSError
    was taken for one, and the failed run put back in the queue, to be failed again, for ever)."""
    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "1")
    monkeypatch.setenv("FROBOZZ_WORKER_RETRY", "0.2")  # tried again 0.2 s, then 0.4 s, after an error
    settings = type(runner_settings)()
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=5), settings, 1)

    def full(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RunStore, "save_info", full)
    run = await worked_until_ended(Worker(ledger, settings), ledger, run_id)
    assert run["status"] == "failed" and run["reason"].endswith("OSError: [Errno 28] No space left on device")
    assert (await ledger.info(run_id)).errors == ATTEMPTS


async def test_a_turn_a_worker_could_not_record_is_an_error_tried_again_and_the_run_goes_on_to_its_end(
    ledger, runner_settings, monkeypatch
):
    """Its disk full for a moment mid-run: the run stopped (a turn it could not record) is the worker's error, queued
    again and played on from its last recorded turn, each turn once (it was left stopped, which no one resumes)."""
    monkeypatch.setenv("FROBOZZ_WORKER_RETRY", "0.2")
    settings = type(runner_settings)()
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=5), settings, 1)
    record, calls = RunStore.record, []

    def full_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return record(self, *args, **kwargs)

    monkeypatch.setattr(RunStore, "record", full_once)
    run = await worked_until_ended(Worker(ledger, settings), ledger, run_id)
    assert (run["status"], run["reason"], run["turns"]) == ("finished", "max turns", 5)
    assert (await ledger.info(run_id)).errors == 1
    assert [t.turn for t in await ledger.turns(run_id)] == [1, 2, 3, 4, 5]


async def test_a_resume_by_hand_while_a_worker_takes_the_run_up_here_is_refused_and_the_worker_plays_each_turn_once(
    ledger, runner_settings, monkeypatch
):
    """The worker's first checkout of a run wrote its files here before marking them the queue's: a `play --resume`
    with no database configured (the queue's being the embedded one) that came in between played the run by hand,
    and the worker then played it on from the database's record, each turn twice. Here the hand resume comes while
    the worker is paused with the run's files written."""
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=6), runner_settings, 1)
    taken, go = anyio.Event(), anyio.Event()
    real = RunLedger.checkout

    async def checkout(self, *args, **kwargs):
        store = await real(self, *args, **kwargs)
        taken.set()
        await go.wait()
        return store

    monkeypatch.setattr(RunLedger, "checkout", checkout)
    worker = Worker(ledger, runner_settings)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await taken.wait()
            try:
                with pytest.raises(ResumeError, match=rf"run {run_id} belongs to the queue"):
                    await play(RunConfig(resume=run_id), runner_settings)
            finally:
                go.set()

            async def ended() -> object:
                return (await ledger.get(run_id))["status"] == "finished"

            await eventually(ended, interval=0.1)
            worker.stop()
    assert worker.played == [run_id]
    assert [t.turn for t in await ledger.turns(run_id)] == list(range(1, 7))
    assert [t.turn for t in RunStore.open(runner_settings.runs_dir, run_id).turns()] == list(range(1, 7))


async def test_a_run_is_the_queue_s_from_the_moment_its_row_is_written_before_its_job_is_made(ledger, runner_settings):
    """enqueue writes the run's row, then makes its job, then writes the job's id in the row: a `play --resume`
    with the database configured that came before the id played the run by hand, as a worker did."""
    info = new_info(RunConfig(game="zork1", player="walkthrough", max_turns=2), runner_settings)
    await ledger.add(info)  # as enqueue writes it, its job not made yet
    with pytest.raises(ResumeError, match=rf"run {info.run_id} belongs to the queue"):
        await play(RunConfig(resume=info.run_id), runner_settings, ledger=ledger)
    row = await ledger.get(info.run_id)
    assert (row["status"], row["turns"]) == ("queued", 0) and not (runner_settings.runs_dir / info.run_id).exists()


async def test_a_run_a_stopped_worker_puts_back_is_queued_everywhere_with_no_end_time(ledger, runner_settings):
    """It was queued in the database with the end time of its stop, and `stopped: interrupted` in its directory
    here (what this machine's web view lists): `runs show` said it had ended, the web that it was not live."""
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=200), runner_settings, 1)
    worker = Worker(ledger, runner_settings)
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)

            async def playing() -> object:
                return (await ledger.get(run_id))["turns"] >= 3

            await eventually(playing, interval=0.1)
            worker.stop()
    row = await run_row(ledger, runner_settings.runs_dir, run_id)  # as `runs show` has it
    assert (row["status"], row["reason"], row["ended_at"]) == ("queued", None, None) and row["turns"] >= 3
    here = RunStore.open(runner_settings.runs_dir, run_id).as_it_stands()  # as the web view here lists it
    assert (here.status, here.reason, here.turns) == ("queued", None, row["turns"])
    assert [r["status"] for r in await all_runs(ledger, runner_settings.runs_dir)] == ["queued"]
    assert worker.played == []
