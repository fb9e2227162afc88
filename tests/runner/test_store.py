import json
from dataclasses import asdict

import pytest

from frobozz.runner import RunInfo, RunNotFoundError, RunStore, TurnRecord


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


@pytest.mark.parametrize("run_id", ["", "../../etc", "20261122-010000-zz", "nope"])
def test_bad_or_unknown_run_ids_are_clear_errors(tmp_path, run_id):
    with pytest.raises(RunNotFoundError):
        RunStore.open(tmp_path, run_id)
    with pytest.raises(RunNotFoundError, match="no run"):
        RunStore.open(tmp_path, "20261122-010000-abcdef")
