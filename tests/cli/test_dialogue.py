"""`frobozz dialogue run` as a user runs it, offline on the scripted model: bad input refused before anything is
written, and a dialogue killed with -9 in round 2 that resumes to the same files as one never killed."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from frobozz.cli import _dialogue
from frobozz.dialogue import (
    DialogueState,
    Report,
    Resumed,
    RoleStats,
    Step,
    StepFinished,
    StepStarted,
    ToolDenied,
    ToolUsed,
)
from tests.dialogue.conftest import QUESTION, prompt
from tests.orphans import descendants, still_running


@pytest.fixture
def cli_env(claude_home, frobozz_env):
    return {
        **os.environ,
        "HOME": str(claude_home),
        "FROBOZZ_DATA_DIR": str(frobozz_env),
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }


@pytest.fixture
def inputs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    question = folder / "question.md"
    question.write_text(QUESTION)
    return {
        "question": question,
        "a1": prompt(folder / "a1.md", "Architect-1"),
        "a2": prompt(folder / "a2.md", "Architect-2"),
        "scribe": prompt(folder / "scribe.md", "Scribe"),
    }


def arguments(inputs, directory, *extra, a2=None):
    return [
        "dialogue",
        "run",
        "--question",
        str(inputs["question"]),
        "--agent",
        f"a1={inputs['a1']}",
        "--agent",
        f"a2={a2 or inputs['a2']}",
        "--scribe",
        str(inputs["scribe"]),
        "--dir",
        str(directory),
        "--model",
        "scripted",
        "--rounds",
        "2",
        *extra,
    ]


def frobozz(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "frobozz", *args], env=env, capture_output=True, text=True, timeout=300
    )


def final_files(directory: Path) -> dict:
    """What a dialogue ends with, but the orchestrator's timestamps (which say when, not what)."""
    entries = json.loads((directory / "dialogue.json").read_text())
    return {
        "entries": [{k: v for k, v in e.items() if k != "timestamp"} for e in entries],
        "summary": (directory / "summary.md").read_text(),
        "synthesis": (directory / "consensus_synthesis.md").read_text(),
    }


def bad_inputs(inputs, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    headless = folder / "headless.md"
    headless.write_text("You are an architect.\n")
    empty, huge = folder / "empty.md", folder / "huge.md"
    empty.write_text("  \n")
    huge.write_text("why? " * (1024 * 1024))  # 5 MB
    return [
        (dict(a2=headless), "has no role header", []),
        (dict(a2=inputs["a1"]), "two participants have the role 'architect-1'", []),
        (dict(question=empty), "is empty", []),
        (dict(question=huge), "5242880 bytes; the limit is 1048576", []),
        (dict(), "leave out --question", ["--resume", str(tmp_path)]),
        (dict(), "'bad model' is not a model's name", ["--model", "bad model"]),  # (every turn then failed)
    ]


def test_bad_input_is_refused_with_a_clear_error_and_nothing_is_written(cli_env, inputs, tmp_path):
    for change, message, extra in bad_inputs(inputs, tmp_path):
        directory = tmp_path / "never"
        given = {**inputs, **{k: v for k, v in change.items() if k == "question"}}
        done = frobozz(cli_env, *arguments(given, directory, *extra, a2=change.get("a2")))
        assert done.returncode == 2, (change, done.stdout, done.stderr)
        assert message in " ".join(done.stderr.split()), (message, done.stderr)
        assert not directory.exists()
    mine = frobozz(cli_env, *arguments(inputs, tmp_path / "in"))  # a folder with a question.md of the user's own
    assert mine.returncode == 2 and "already holds a dialogue (or its files)" in " ".join(mine.stderr.split())
    assert inputs["question"].read_text() == QUESTION and not (tmp_path / "in" / "dialogue.json").exists()
    nothing = frobozz(cli_env, "dialogue", "run", "--resume", str(tmp_path / "in"))
    assert nothing.returncode == 2 and "holds no dialogue to resume" in nothing.stderr
    other = tmp_path / "project"  # files of another kind: the dialogue would be written among them
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    (tmp_path / "link").symlink_to(other)  # (as a link to /etc would be, as root)
    for directory in (other, tmp_path / "link"):
        done = frobozz(cli_env, *arguments(inputs, directory))
        assert done.returncode == 2 and "holds other files: a dialogue goes in a new or an empty directory" in (
            " ".join(done.stderr.split())
        )
    assert [p.name for p in other.iterdir()] == ["keep.txt"]


def test_a_resume_given_rounds_is_refused_rather_than_run_with_the_rounds_it_was_set_up_with(cli_env, tmp_path):
    """`--resume DIR --rounds 5` would otherwise end after the dialogue's own rounds, the 5 silently dropped."""
    done = frobozz(cli_env, "dialogue", "run", "--resume", str(tmp_path), "--rounds", "5")
    assert done.returncode == 2 and "--dir and --rounds" in done.stderr, done.stderr


def test_a_dialogue_killed_in_round_two_resumes_to_the_same_files_as_one_never_killed(cli_env, inputs, tmp_path):
    whole = frobozz(cli_env, *arguments(inputs, tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    assert (
        "dialogue finished: 2 rounds, 4 entries" in whole.stdout and "[Tool] Edit: dialogue.json (old: " in whole.stdout
    )

    killed = tmp_path / "killed"
    child = pexpect.spawn(
        sys.executable, ["-m", "frobozz", *arguments(inputs, killed)], env=cli_env, encoding="utf-8", timeout=180
    )
    child.expect_exact("▶ round 2 · Architect-2")
    child.expect_exact("[Tool] Read: dialogue.json")  # mid-turn: read, not yet edited
    children = descendants(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    assert still_running(children, within=10) == []  # the claudes died with it

    # a dialogue.json broken by hand: the resume refuses, says where the good copy is, and changes nothing
    dialogue = killed / "dialogue.json"
    kept = dialogue.read_text()
    dialogue.write_text(kept.replace('"role": "Architect-1"', '"role": "Architect-9"', 1))
    broken = dialogue.read_text()
    refused = frobozz(cli_env, "dialogue", "run", "--resume", str(killed))
    assert refused.returncode == 2 and "does not match the orchestrator's record" in refused.stderr
    assert "good/dialogue.json" in refused.stderr and dialogue.read_text() == broken
    dialogue.write_text(kept[:40])
    refused = frobozz(cli_env, "dialogue", "run", "--resume", str(killed))
    assert refused.returncode == 2 and "is broken: it is not JSON" in refused.stderr

    dialogue.write_text(kept)
    resumed = frobozz(cli_env, "dialogue", "run", "--resume", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming after 4 finished steps; 2:agent:Architect-2 was cut off and runs again" in resumed.stdout
    assert "round 1 ·" not in resumed.stdout  # no finished turn again
    assert final_files(killed) == final_files(tmp_path / "whole")
    assert "dialogue finished: 2 rounds, 4 entries" in resumed.stdout
    again = frobozz(cli_env, "dialogue", "run", "--resume", str(killed))  # a finished dialogue: only its table
    assert again.returncode == 0 and "▶" not in again.stdout and "dialogue finished: 2 rounds" in again.stdout
    taken = frobozz(cli_env, *arguments(inputs, killed))
    assert taken.returncode == 2 and "already holds a dialogue" in taken.stderr


FINISHED = re.compile(r"✓ (\d+) tools?, [\d.]+ s, \$(\d+\.\d{4})")
ROW = re.compile(r"│ *(\S+) *│ *\S+ *│ *(\d+) *│ *(\d+) *│ *\d+ *│ *[\d.]+ s *│ *\$(\d+\.\d{4}) *│")


def turn_costs(stdout: str) -> list[tuple[int, float]]:
    """Each finished turn of the live view: its tools and its cost."""
    return [(int(tools), float(cost)) for tools, cost in FINISHED.findall(stdout)]


def table_of(stdout: str) -> dict[str, tuple[int, int, float]]:
    """The final table: role -> turns, tools, cost."""
    return {role: (int(turns), int(tools), float(cost)) for role, turns, tools, cost in ROW.findall(stdout)}


@pytest.mark.parametrize(
    "cut",
    [("▶ round 1 · Architect-2",), ("▶ round 1 · Scribe (summary)", "[Tool] Read: summary.md")],
    ids=["between-turns", "in-the-scribes-turn"],
)
def test_every_turn_after_a_kill_and_a_resume_costs_what_its_requests_cost_and_so_do_the_totals(
    cli_env, inputs, tmp_path, cut
):
    """The scripted model bills every request alike, and each request of a turn ends in one tool call or in the
    turn's last word: a turn costs (tools + 1) requests, a role (tools + turns). A claude killed with -9 leaves no
    running total for its resume to carry on from: the resumed claude counts from what claude restores, not from
    what the ledger says the role spent (the first turn of a resumed role cost $0.0000)."""
    whole = frobozz(cli_env, *arguments(inputs, tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    costs = {cost for _, cost in turn_costs(whole.stdout)}
    assert len(costs) == 1 and {tools for tools, _ in turn_costs(whole.stdout)} == {2}
    request = costs.pop() / 3  # Read, Edit, the last word

    killed = tmp_path / "killed"
    child = pexpect.spawn(
        sys.executable, ["-m", "frobozz", *arguments(inputs, killed)], env=cli_env, encoding="utf-8", timeout=180
    )
    for line in cut:
        child.expect_exact(line)
    children = descendants(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    assert still_running(children, within=10) == []
    resumed = frobozz(cli_env, "dialogue", "run", "--resume", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    assert "was cut off and runs again" in resumed.stdout and final_files(killed) == final_files(tmp_path / "whole")
    turns = turn_costs(resumed.stdout)
    assert len(turns) >= 5 and [cost for _, cost in turns] == [round((tools + 1) * request, 4) for tools, _ in turns]
    table = table_of(resumed.stdout)
    assert {role: turns for role, (turns, _, _) in table.items()} == {"Architect-1": 2, "Architect-2": 2, "Scribe": 3}
    assert {role: cost for role, (_, _, cost) in table.items()} == {
        role: round((tools + turns) * request, 4) for role, (turns, tools, _) in table.items()
    }


def test_the_live_view_errors_and_table_keep_whole_lines_at_80_columns_when_piped(
    cli_env, inputs, tmp_path, monkeypatch
):
    """Piped (to grep, to a file) at 80 columns, a long line must not be broken where the columns end: each event
    and each error is one whole line, and the table fits the width with every role's whole name in it."""
    binary = tmp_path / "question.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x00")
    done = frobozz({**cli_env, "COLUMNS": "80"}, *arguments({**inputs, "question": binary}, tmp_path / "never"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and len(done.stderr) > 80, done.stderr
    assert "is binary, not text" in done.stderr

    piped = io.StringIO()
    monkeypatch.setattr(_dialogue.out, "file", piped)
    monkeypatch.setattr(_dialogue.out, "width", 80)
    long_role = "Architect-2-of-the-long-and-winding-name"
    denial = ToolDenied(
        long_role,
        "Edit",
        "dialogue.json",
        "entry 2's role is the orchestrator's: only the last entry's content and consensus may change",
    )
    for event in (StepStarted(Step("agent", 2, long_role)), denial, ToolUsed(long_role, "[Tool] Read: x" + "y" * 90)):
        _dialogue._show(event)
    assert len(piped.getvalue().splitlines()) == 3 and denial.reason in piped.getvalue()
    piped.seek(0), piped.truncate()
    report = Report(
        state=DialogueState.CONSENSUS,
        rounds=2,
        roles=(RoleStats(long_role, "a2", 3, 6, 2, 1234.5, 10.5), RoleStats("Scribe", "scribe", 4, 8, 0, 3.0, 0.0)),
        consensus_round=2,
        consensus_role=long_role,
        consensus_how="field",
        restores=1,
        entries=5,
    )
    _dialogue._table(report, tmp_path / ("folder-" * 12))
    *table, last = piped.getvalue().splitlines()
    folded = "".join(line.split("│")[1].strip() for line in table if line.startswith("│"))  # the role column
    assert all(len(line) <= 80 for line in table) and long_role in folded
    assert last.startswith("consensus: round 2") and last.endswith("folder-")


def test_the_table_and_the_live_view_say_one_round_one_entry_and_one_tool_in_the_singular(monkeypatch, tmp_path):
    piped = io.StringIO()
    monkeypatch.setattr(_dialogue.out, "file", piped)
    monkeypatch.setattr(_dialogue.out, "width", 200)
    report = Report(
        DialogueState.FINISHED, 1, (RoleStats("Architect-1", "a1", 1, 1, 0, 1.0, 0.0),), None, None, None, 0, 1
    )
    _dialogue._table(report, tmp_path)
    _dialogue._show(StepFinished(Step("agent", 1, "Architect-1"), 1.0, 1, 0.0))
    _dialogue._show(Resumed(done=1, rewound=None))
    shown = piped.getvalue()
    assert "dialogue finished: 1 round, 1 entry" in shown and "✓ 1 tool, 1.0 s" in shown
    assert "resuming after 1 finished step" in shown and "1 rounds" not in shown
