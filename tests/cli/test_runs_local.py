"""`frobozz runs`, `runs show` and `leaderboard` of runs played on this machine: what they say of a run that
failed at its start, of a run folder that cannot be read, and at 80 columns."""

import json
import os
import re

from frobozz.cli import _runs as runs_cli
from tests.cli.in_process import frobozz_here


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    (tmp_path / "home").mkdir(exist_ok=True)
    return {**env, "HOME": str(tmp_path / "home")}


def _shown(done):
    """`runs show`'s fields, name: value (the grid puts two spaces or more between them)."""
    pairs = (re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in done.stdout.splitlines())
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def test_a_damaged_run_folder_is_said_by_runs_and_runs_show_says_it_is_damaged_and_where(
    frobozz_env, tmp_path, monkeypatch
):
    """`runs` left it out without a word, and `runs show` said "no run … nor on this machine"."""
    env = _env(tmp_path)
    empty = frobozz_here(env, monkeypatch, "runs")
    assert "no runs yet" in empty.stdout and "cannot be read" not in empty.stderr
    folder = frobozz_env / "runs" / "20261130-000000-badbad"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text('{"broken\n')
    listed = frobozz_here(env, monkeypatch, "runs")
    said = " ".join(listed.stderr.split())
    assert "1 run folder(s) in" in said and "cannot be read" in said and "20261130-000000-badbad" in said
    shown = frobozz_here(env, monkeypatch, "runs", "show", "20261130-000000-badbad", code=1)
    said = "".join(shown.stderr.split())  # (a long path may be wrapped)
    assert "run20261130-000000-badbadisdamaged:itsrecord" in said and str(folder / "run.json") in said
    assert "nor on this machine" not in said


def test_runs_json_lists_a_damaged_run_folder_as_a_run_with_status_damaged_and_why_and_the_others_as_before(
    frobozz_env, tmp_path, monkeypatch
):
    """`runs --json` left it out: only the warning on stderr named it, which a reader of the JSON never sees."""
    env = _env(tmp_path)
    frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "2", "--json")
    (good,) = json.loads(frobozz_here(env, monkeypatch, "runs", "--json").stdout)
    folder = frobozz_env / "runs" / "20261130-000000-badbad"
    folder.mkdir()
    (folder / "run.json").write_text('{"broken\n')
    listed = frobozz_here(env, monkeypatch, "runs", "--json")
    rows = json.loads(listed.stdout)
    assert [r["run_id"] for r in rows] == [good["run_id"], folder.name]  # newest first (its id says when it was made)
    assert rows[0] == good  # the others' fields as they were
    damaged = rows[1]
    assert set(damaged) == set(good) and damaged["status"] == "damaged" and damaged["run_dir"] == str(folder)
    assert damaged["reason"].startswith(f"run {folder.name} is damaged: its record {folder / 'run.json'}")
    assert damaged["created"].startswith("2026-11-30 00:00:00") and damaged["game"] is None
    assert 'listed with status "damaged"' in " ".join(listed.stderr.split())
    only = json.loads(frobozz_here(env, monkeypatch, "runs", "--json", "--status", "damaged").stdout)
    assert [r["run_id"] for r in only] == [folder.name]
    for filtered in (("--status", "finished"), ("--game", "zork1")):  # (a damaged run's game is not known)
        assert [
            r["run_id"] for r in json.loads(frobozz_here(env, monkeypatch, "runs", "--json", *filtered).stdout)
        ] == [good["run_id"]]
    assert [
        r["run_id"] for r in json.loads(frobozz_here(env, monkeypatch, "runs", "--json", "--limit", "1").stdout)
    ] == [good["run_id"]]


def test_a_run_played_here_that_fails_at_its_start_is_shown_failed_with_when_and_where_its_files_are(
    frobozz_env, tmp_path, monkeypatch
):
    """A game with no walkthrough made a run before refusing (0 turns, "stopped: killed"), and `runs show` of a
    run played here said "files: on the worker's machine (None), not this one", started and ended "-"."""
    from frobozz.engine import EngineError
    from frobozz.runner import _run

    env = _env(tmp_path)
    refused = frobozz_here(
        env, monkeypatch, "play", "zork1-r119", "--player", "walkthrough", "--max-turns", "5", code=1
    )
    assert "has no known walkthrough" in refused.stderr
    assert not (frobozz_env / "runs").exists() or not list((frobozz_env / "runs").iterdir())  # no run made

    async def broken(*args, **kwargs):
        raise EngineError("claude cannot start here")

    monkeypatch.setattr(_run, "session_parts", broken)
    failed = frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "5", code=1)
    assert "claude cannot start here" in failed.stderr
    (run_dir,) = (frobozz_env / "runs").iterdir()
    (row,) = json.loads(frobozz_here(env, monkeypatch, "runs", "--json").stdout)
    assert (row["run_id"], row["status"]) == (run_dir.name, "failed")
    monkeypatch.setattr(runs_cli.out, "width", 200)  # (one line a field)
    fields = _shown(frobozz_here(env, monkeypatch, "runs", "show", run_dir.name))
    assert fields["status"] == "failed: it could not be played: claude cannot start here"
    assert fields["started"] != "-" and fields["ended"] != "-" and fields["started"] <= fields["ended"]
    assert fields["run directory"] == str(run_dir)
    assert fields["transcript.md"] == str(run_dir / "transcript.md")
    (run_dir / "transcript.md").unlink()  # as a run killed before its transcript began has none
    fields = _shown(frobozz_here(env, monkeypatch, "runs", "show", run_dir.name))
    assert "on this machine" in fields["files"] and "worker" not in fields["files"]


def test_the_leaderboard_at_80_columns_shows_every_number_whole_and_what_was_played_folds(
    frobozz_env, tmp_path, monkeypatch
):
    """Ten columns at 80 were cut to "(def… walk… 15/3…"."""
    env = _env(tmp_path)
    monkeypatch.setattr(runs_cli.out, "width", 80)  # (made when first imported, as wide as COLUMNS was then)
    assert "no finished runs yet" in frobozz_here(env, monkeypatch, "leaderboard").stdout
    frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--json")
    lines = frobozz_here(env, monkeypatch, "leaderboard").stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in "".join(lines)
    header = next(line for line in lines if "runs" in line.split())
    assert ["mean", "score", "best", "wins", "mean", "turns", "cost/point"] == header.split()[-7:]
    (row,) = [line for line in lines if line.split()[-6:] == ["1", "0.0", "0/350", "0", "3.0", "-"]]
    played = " ".join(line[: header.index("runs")].strip() for line in lines[lines.index(row) :][:4])
    assert "(default), walkthrough, zork1 (text)" in " ".join(played.split())


def test_a_run_whose_snapshot_is_damaged_is_shown_saying_so_and_its_resume_is_refused_naming_it(
    frobozz_env, tmp_path, monkeypatch
):
    """`runs show` and `play --resume` of it ended in a traceback (JSONDecodeError); the resume left the run
    "running", then listed as killed."""
    env = _env(tmp_path)
    frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--json")
    (run_dir,) = (frobozz_env / "runs").iterdir()
    snapshot = run_dir / "snapshot.json"
    snapshot.write_text('{"record": {"tu')
    before = (run_dir / "run.json").read_bytes()
    monkeypatch.setattr(runs_cli.out, "width", 200)  # (one line a field)
    shown = frobozz_here(env, monkeypatch, "runs", "show", run_dir.name)
    said = "".join(shown.stderr.split())  # (a long path may be wrapped)
    assert f"run{run_dir.name}isdamaged:itsrecord{snapshot}cannotberead" in said and "Traceback" not in said
    fields = _shown(shown)
    assert (fields["status"], fields["turns"]) == ("finished: max turns", "3") and "turn 3" in shown.stdout
    as_json = frobozz_here(env, monkeypatch, "runs", "show", run_dir.name, "--json")
    assert json.loads(as_json.stdout)["last_turn"]["turn"] == 3 and str(snapshot) in "".join(as_json.stderr.split())
    refused = frobozz_here(env, monkeypatch, "play", "--resume", run_dir.name, "--max-turns", "6", code=1)
    said = "".join(refused.stderr.split())
    assert f"error:run{run_dir.name}isdamaged:itsrecord{snapshot}" in said and "Traceback" not in said
    assert (run_dir / "run.json").read_bytes() == before  # as it was: not left "running"


def test_runs_at_80_and_at_40_columns_shows_status_score_turns_and_cost_whole_and_at_80_the_run_id_too(
    frobozz_env, tmp_path, monkeypatch
):
    """At 80 columns (piped) the cost was cut to "cos" and "$0.000", at 40 the status and score to "fi…", "3…"."""
    env = _env(tmp_path)
    frobozz_here(env, monkeypatch, "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--json")
    (run,) = json.loads(frobozz_here(env, monkeypatch, "runs", "--json").stdout)
    for width in (80, 40):
        monkeypatch.setattr(runs_cli.out, "width", width)
        lines = frobozz_here(env, monkeypatch, "runs").stdout.splitlines()
        assert max(map(len, lines)) <= width and "…" not in "".join(lines), "\n".join(lines)
        header = next(line for line in lines if "status" in line.split())
        assert header.split()[-4:] == ["status", "score", "turns", "cost"], "\n".join(lines)
        (row,) = [line for line in lines if line.split()[-4:] == ["finished", "0/350", "3", "$0.0000"]]
        if width == 80:
            assert row.split()[0] == run["run_id"]
    assert run["run_id"] in "".join(line.split()[0] for line in lines if line.strip() and "─" not in line)
