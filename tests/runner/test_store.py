import json
import subprocess
import sys
from dataclasses import asdict, replace
from datetime import UTC, datetime

import pytest

from frobozz.runner import RunBusyError, RunInfo, RunNotFoundError, RunStore, TurnRecord


def _info(run_id="20261122-010000-abcdef"):
    return RunInfo(
        run_id=run_id,
        game="zork1",
        story="/x/zork1.z5",
        story_md5="m",
        title="Zork I",
        player="walkthrough",
        mode="text",
        model=None,
        max_turns=None,
        max_cost=None,
        max_seconds=None,
        multi=False,
        prompt_file=None,
        created="2026-11-22T01:00:00+00:00",
    )


def _turn(n):
    return TurnRecord(
        turn=n, command=f"c{n}", text=f"t{n}", score=n, moves=n, location="Kitchen", done=False, won=False
    )


def test_turns_are_committed_one_line_each_and_read_back_in_order(tmp_path):
    store = RunStore.create(tmp_path, _info())
    for n in (1, 2, 3):
        store.record(_turn(n), {"state": n})
    again = RunStore.open(tmp_path, store.info.run_id)
    assert [t.turn for t in again.turns()] == [1, 2, 3]
    assert again.snapshot()["state"] == 3 and again.snapshot()["record"]["turn"] == 3


def test_a_torn_last_line_and_a_turn_only_in_the_snapshot_are_both_recovered(tmp_path):
    store = RunStore.create(tmp_path, _info())
    store.record(_turn(1), {"state": 1})
    with (store.dir / "turns.jsonl").open("a") as f:
        f.write('{"turn": 2, "comm')  # a crash in the middle of a line
    (store.dir / "snapshot.json").write_text(json.dumps({"record": asdict(_turn(2)), "state": 2}))
    assert [t.turn for t in store.turns()] == [1, 2]  # turn 2 comes back from its snapshot
    assert [t.turn for t in store.turns()] == [1, 2]  # and is written back only once


@pytest.mark.parametrize(
    "damaged",
    ['{"record": {"tu', "[1, 2]", '{"record": 5, "state": 3}', '{"record": {"turn": 3}, "state": 3}'],
    ids=["cut off", "not an object", "its turn not an object", "its turn not a turn"],
)
def test_a_damaged_snapshot_is_said_damaged_naming_it_and_the_runs_turns_are_still_read(tmp_path, damaged):
    """Reading it ended in a traceback: the live run page, `runs show`, a killed run's listing, `play --resume`."""
    from frobozz.runner import RunDamagedError

    store = RunStore.create(tmp_path, _info(), hold=True)
    for n in (1, 2, 3):
        store.record(_turn(n), {"state": n})
    assert store.damage() is None
    (store.dir / "snapshot.json").write_text(damaged)
    with pytest.raises(RunDamagedError, match=rf"run {store.info.run_id} is damaged: its record .*snapshot\.json"):
        store.snapshot()
    assert store.damage().path == store.dir / "snapshot.json" and store.damage().run_id == store.info.run_id
    assert [t.turn for t in store.turns(repair=False)] == [1, 2, 3] == [t.turn for t in store.turns()]
    store.let_go()  # killed
    gone = store.as_it_stands()
    assert (gone.status, gone.reason, gone.turns, gone.score) == ("stopped", "killed", 3, 3)


@pytest.mark.parametrize("run_id", ["", "../../etc", "20261122-010000-zz", "nope"])
def test_bad_or_unknown_run_ids_are_clear_errors(tmp_path, run_id):
    with pytest.raises(RunNotFoundError):
        RunStore.open(tmp_path, run_id)
    with pytest.raises(RunNotFoundError, match="no run"):
        RunStore.open(tmp_path, "20261122-010000-abcdef")


def test_a_run_is_held_by_one_process_at_a_time_and_let_go_the_moment_its_holder_is_killed(tmp_path):
    store = RunStore.create(tmp_path, _info(), hold=True)
    assert store.played_now() is True
    with pytest.raises(RunBusyError, match="being played by another process now"):
        RunStore.open(tmp_path, store.info.run_id).hold()  # (another open file: as another process's)
    store.let_go()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.dir / "lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert store.played_now() is True
        with pytest.raises(RunBusyError):
            store.hold()
    finally:
        holder.kill()  # SIGKILL: nothing of its own lets the lock go
        holder.wait()
    assert store.played_now() is False
    with store:
        store.hold()
        assert store.played_now() is True
    assert store.played_now() is False


HOLDER = """import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_running_run_that_no_process_plays_is_seen_as_its_committed_turns_left_it(tmp_path):
    """run.json is rewritten at a run's end, not at every turn: a killed run's said "running", 0 turns."""
    store = RunStore.create(tmp_path, _info(), hold=True)
    assert store.as_it_stands() == store.info  # played now, nothing committed yet: as it is
    store.let_go()
    gone = store.as_it_stands()
    assert (gone.status, gone.reason, gone.turns, gone.score) == ("stopped", "killed", 0, None)  # killed at once
    store.hold()
    for n in (1, 2, 3):
        store.record(_turn(n), None)
    assert store.as_it_stands().status == "running"
    store.let_go()
    gone = store.as_it_stands()
    assert (gone.status, gone.reason, gone.turns, gone.score) == ("stopped", "killed", 3, 3)
    assert RunStore.open(tmp_path, store.info.run_id).info.status == "running"  # only seen so: nothing written
    older = RunStore.create(tmp_path, _info("20261122-010000-123456"))  # made before there were locks
    assert older.played_now() is None and older.as_it_stands() == older.info


def test_a_live_run_stands_at_its_last_committed_turn_though_its_run_json_is_from_its_start(tmp_path):
    """run.json is written when a run starts or resumes and when it ends: a live run's page said 0 turns for ever."""
    store = RunStore.create(tmp_path, replace(_info(), max_turns=400), hold=True)
    now = store.as_it_stands()
    assert (now.status, now.turns, now.score, now.moves) == ("running", 0, None, None)  # nothing committed yet
    store.record(_turn(1), None)
    store.record(replace(_turn(2), score=15, moves=7, cost_usd=0.25), None)
    with (store.dir / "turns.jsonl").open("a") as f:
        f.write('{"turn": 3, "comm')  # the next line, being written as the page looks
    now = RunStore.open(tmp_path, store.info.run_id).as_it_stands()
    assert (now.status, now.reason, now.turns, now.score, now.moves) == ("running", None, 2, 15, 7)
    assert now.cost_usd == 0.25 and now.max_turns == 400
    assert RunStore.open(tmp_path, store.info.run_id).info.turns == 0  # only seen so: nothing written


def test_a_long_runs_last_turn_is_read_from_the_end_of_its_turns_even_when_its_line_is_longer_than_a_read(tmp_path):
    store = RunStore.create(tmp_path, _info(), hold=True)
    for n in range(1, 200):
        store.record(_turn(n), None)
    store.record(replace(_turn(200), text="a long answer " * 20_000), None)  # (a line past the first read)
    store.record(replace(_turn(201), reply="x" * 100_000, score=40, moves=230), None)
    assert store.last_turn() == store.turns(repair=False)[-1]
    now = store.as_it_stands()
    assert (now.turns, now.score, now.moves) == (201, 40, 230)
    assert RunStore.create(tmp_path, _info("20261122-010000-123456")).last_turn() is None  # the empty case


def test_a_killed_run_shows_the_moves_of_its_last_turn_too(tmp_path):
    store = RunStore.create(tmp_path, _info(), hold=True)
    store.record(replace(_turn(1), score=5, moves=9), None)
    store.record(replace(_turn(2), score=5, moves=12), {"state": 2})
    (store.dir / "snapshot.json").write_text(json.dumps({"record": asdict(replace(_turn(3), moves=14))}))
    store.let_go()  # killed between turn 3's snapshot and its line
    gone = store.as_it_stands()
    assert (gone.status, gone.reason, gone.turns, gone.score, gone.moves) == ("stopped", "killed", 3, 3, 14)


@pytest.mark.anyio
async def test_a_resumed_run_says_it_is_running_again_so_a_kill_after_it_is_seen_as_one(frobozz_env):
    """A resume set "running" in memory only: killed after it, the run was still listed as interrupted. A resume
    refused (its player not ready) leaves run.json as it was."""
    from frobozz.runner import PlayerError, RunConfig, RunnerSettings
    from frobozz.runner._run import _opened

    settings = RunnerSettings()  # (its data folder: the test's own)
    store = RunStore.create(settings.runs_dir, _info(), hold=True)
    for n in (1, 2):
        store.record(_turn(n), None)
    store.info.status, store.info.reason, store.info.turns = "stopped", "interrupted", 2
    store.save_info()
    store.let_go()
    assert store.as_it_stands().reason == "interrupted"  # stopped as it said: nothing to see otherwise
    again = RunConfig(resume=store.info.run_id, max_turns=50)
    claude = {**asdict(store.info), "player": "claude"}  # (not logged in here)
    (store.dir / "run.json").write_text(json.dumps(claude))
    before = (store.dir / "run.json").read_bytes()
    with pytest.raises(PlayerError):
        await _opened(again, settings, None, queued=False, handler=None, cli_path=None)
    assert (store.dir / "run.json").read_bytes() == before and store.played_now() is False  # as it was, let go
    (store.dir / "run.json").write_text(json.dumps({**claude, "player": "walkthrough"}))
    resumed, _, stopped_by = await _opened(again, settings, None, queued=False, handler=None, cli_path=None)
    assert stopped_by == "interrupted" and resumed.played_now() is True
    with pytest.raises(RunBusyError):  # a second resume meanwhile
        await _opened(again, settings, None, queued=False, handler=None, cli_path=None)
    resumed.record(_turn(3), None)
    resumed.let_go()  # killed
    gone = RunStore.open(settings.runs_dir, store.info.run_id).as_it_stands()
    assert (gone.status, gone.reason, gone.turns, gone.max_turns) == ("stopped", "killed", 3, 50)


@pytest.mark.anyio
async def test_a_run_played_here_and_killed_is_listed_killed_though_the_database_says_running(ledger, frobozz_env):
    """The database's row wins in `runs`; for a run played here by hand it said "running" for ever after a kill.
    A worker's run says what the database says (another worker may have taken it up)."""
    from frobozz.runner import RunnerSettings, all_runs, run_row

    settings = RunnerSettings()
    assert await all_runs(ledger, settings.runs_dir) == []  # the empty case
    store = RunStore.create(settings.runs_dir, _info(), hold=True)
    await ledger.add(store.info, queued=False)
    for n in (1, 2):
        store.record(_turn(n), None)
    (row,) = await all_runs(ledger, settings.runs_dir)
    assert row["status"] == "running"  # played now
    store.let_go()  # killed
    (row,) = await all_runs(ledger, settings.runs_dir)
    shown = await run_row(ledger, settings.runs_dir, store.info.run_id)
    assert (row["status"], row["reason"], row["turns"]) == ("stopped", "killed", 2)
    assert (shown["status"], shown["reason"], shown["turns"], shown["in_database"]) == ("stopped", "killed", 2, True)
    await ledger.save(store.info, worker="another-machine")
    (row,) = await all_runs(ledger, settings.runs_dir)
    assert row["status"] == "running"  # a worker's: as the database has it


def test_a_run_folder_whose_run_json_cannot_be_read_is_said_damaged_with_where_not_no_such_run(tmp_path):
    """It was passed over without a word: `runs` left it out, and `runs show` said there was no such run."""
    import anyio

    from frobozz.runner import RunDamagedError, damaged_runs, local_infos, run_row

    assert damaged_runs(tmp_path / "none") == [] and damaged_runs(tmp_path) == []
    RunStore.create(tmp_path, _info())
    (tmp_path / "20261122-010000-abcd00").mkdir()  # one being made: no run.json yet, not damaged
    (tmp_path / "not-a-run").mkdir()
    broken = {
        "20261130-000000-badbad": '{"broken',
        "20261130-000000-badba1": "[1, 2]",
        "20261130-000000-badba2": '{"run_id": "20261130-000000-badba2"}',
    }
    for run_id, text in broken.items():
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "run.json").write_text(text)
    found = {d.run_id: d for d in damaged_runs(tmp_path)}
    assert sorted(found) == sorted(broken)
    assert all(d.path == tmp_path / run_id / "run.json" for run_id, d in found.items())
    assert [i.run_id for i in local_infos(tmp_path)] == [_info().run_id]  # the list has the readable one
    with pytest.raises(
        RunDamagedError, match=rf"run 20261130-000000-badbad is damaged: its record {tmp_path}/20261130"
    ):
        anyio.run(run_row, None, tmp_path, "20261130-000000-badbad")
    with pytest.raises(RunNotFoundError, match="no run 20261130-000000-aaaaaa") as missing:
        anyio.run(run_row, None, tmp_path, "20261130-000000-aaaaaa")
    assert not isinstance(missing.value, RunDamagedError)


def test_a_local_runs_start_and_end_are_taken_from_its_own_record(tmp_path):
    """`runs show` said started and ended "-" for a run played here, though it had started and ended."""
    import anyio

    from frobozz.runner import run_row

    def shown(run_id):
        row = anyio.run(run_row, None, tmp_path, run_id)
        return row["started_at"], row["ended_at"]

    playing = RunStore.create(tmp_path, _info(), hold=True)
    assert shown(playing.info.run_id) == (datetime(2026, 11, 22, 1, tzinfo=UTC), None)  # playing: not ended
    playing.let_go()  # killed before a turn: ended, but when is not known
    assert shown(playing.info.run_id) == (datetime(2026, 11, 22, 1, tzinfo=UTC), None)
    killed = RunStore.create(tmp_path, _info("20261122-010000-111111"), hold=True)
    killed.record(replace(_turn(1), at="2026-11-22T01:05:00+00:00"), None)
    killed.let_go()  # killed after a turn: it ended at its last turn
    assert shown(killed.info.run_id)[1] == datetime(2026, 11, 22, 1, 5, tzinfo=UTC)
    ended = RunStore.create(tmp_path, replace(_info("20261122-010000-222222"), status="finished", reason="died"))
    ended.info.ended = "2026-11-22T02:00:00+00:00"
    ended.save_info()
    assert shown(ended.info.run_id) == (datetime(2026, 11, 22, 1, tzinfo=UTC), datetime(2026, 11, 22, 2, tzinfo=UTC))
