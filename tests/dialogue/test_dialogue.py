"""Dialogues through the real claude CLI on the scripted model: the agents only Read and Edit files, the
orchestrator writes every entry's metadata, the scribe's summary and synthesis, consensus, and denials."""

from __future__ import annotations

import json
import signal
import sys
from datetime import datetime, timedelta

import pexpect
import pytest

from frobozz.dialogue import (
    ConsensusReached,
    Dialogue,
    DialogueFileError,
    DialogueState,
    FileRestored,
    Resumed,
    ScriptedDialogue,
    Step,
    StepFinished,
    StepStarted,
    ToolDenied,
    ToolUsed,
    TurnError,
)
from frobozz.dialogue._scripted import instruction_of, last_tool
from frobozz.engine.testing import ApiError, Reply, ScriptedModel, ToolUse
from tests.dialogue.conftest import QUESTION, run_dialogue

pytestmark = pytest.mark.anyio


def user_texts(request) -> list[str]:
    """What the orchestrator said to the model in a request: its user text blocks (claude's own reminders and
    the tool results, which are the files the agent chose to read, left out)."""
    texts = []
    for message in request.messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [
            b["text"]
            for b in blocks
            if message.get("role") == "user"
            and b.get("type") == "text"
            and not b["text"].lstrip().startswith("<system-reminder>")
        ]
    return texts


async def test_two_agents_and_a_scribe_fill_three_rounds_the_orchestrator_writes_the_metadata(
    make_options, roles, tmp_path
):
    path, events = tmp_path / "talk", []
    script = ScriptedDialogue()
    async with ScriptedModel(script) as model:
        report = await run_dialogue(path, make_options(model), roles, events=events)
    entries = json.loads((path / "dialogue.json").read_text())
    assert [(e["round"], e["role"]) for e in entries] == [
        (1, "Architect-1"),
        (1, "Architect-2"),
        (2, "Architect-1"),
        (2, "Architect-2"),
        (3, "Architect-1"),
        (3, "Architect-2"),
    ]
    assert [e["content"] for e in entries] == [script.content(e["role"], e["round"]) for e in entries]
    assert not any(e["consensus"] for e in entries)
    stamps = [datetime.fromisoformat(e["timestamp"]) for e in entries]  # the orchestrator's, in order, in UTC
    assert stamps == sorted(stamps) and all(s.utcoffset() == timedelta(0) for s in stamps)
    summary = (path / "summary.md").read_text()
    assert [f"## Round {n}" in summary and f"Scribe's summary of round {n}" in summary for n in (1, 2, 3)] == [True] * 3
    synthesis = (path / "consensus_synthesis.md").read_text()
    assert "no consensus after 3 rounds" in synthesis and "(scripted) Scribe's synthesis." in synthesis
    assert report.state is DialogueState.FINISHED and report.rounds == 3 and report.consensus_round is None
    assert {(r.role, r.turns, r.tools) for r in report.roles} == {
        ("Architect-1", 3, 6),
        ("Architect-2", 3, 6),
        ("Scribe", 4, 8),
    }
    lines = [e.line for e in events if isinstance(e, ToolUsed)]
    assert any(line.startswith("[Tool] Edit: dialogue.json (old: ") for line in lines)
    assert (path / ".dialogue" / "tools-a1.log").read_text().count("[Tool] ") == 6
    # the orchestrator's prompts carry paths, never the dialogue's content
    written = [e["content"] for e in entries] + [QUESTION.strip()]
    for request in model.requests:
        said = "\n".join(user_texts(request)) + request.system
        assert not [w for w in written if w in said]
    assert len([e for e in events if isinstance(e, StepFinished)]) == 10
    offered = {tool for r in model.requests for tool in r.tools} - {"DeferredToolPlaceholder"}  # claude's own stub
    assert offered == {"Edit", "Read"}  # the roles' tools, and no others


async def test_an_agent_that_changes_a_role_or_adds_an_entry_is_denied_and_the_metadata_is_kept(
    make_options, roles, tmp_path
):
    script = ScriptedDialogue()
    rename = {"old_string": '"role": "Architect-2"', "new_string": '"role": "Architect-1"'}
    add = {
        "old_string": "\n  }\n]",
        "new_string": '\n  },\n  {"round": 9, "role": "Architect-2", "timestamp": "now", '
        '"content": "mine", "consensus": true}\n]',
    }

    def hostile(request):
        """Architect-2 reads, then renames its role, then adds an entry of its own, then gives up."""
        if "Architect-2 Prompt" not in request.system or last_tool(request) is None:
            return script(request)
        edits = [
            b
            for m in request.messages
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_use" and b["name"] == "Edit"
        ]
        if len(edits) < 2:
            dialogue = str(tmp_path / "talk" / "dialogue.json")
            return Reply((ToolUse("Edit", {"file_path": dialogue, **(add if edits else rename)}),))
        return "I could not change it."

    path, events = tmp_path / "talk", []
    async with ScriptedModel(hostile) as model:
        report = await run_dialogue(path, make_options(model), roles, rounds=1, events=events)
    entries = json.loads((path / "dialogue.json").read_text())
    assert [(e["round"], e["role"], e["content"]) for e in entries] == [
        (1, "Architect-1", script.content("Architect-1", 1)),
        (1, "Architect-2", ""),
    ]
    denied = [e for e in events if isinstance(e, ToolDenied)]
    assert [(d.role, d.tool) for d in denied] == [("Architect-2", "Edit")] * 2
    assert "entry 2's role is the orchestrator's" in denied[0].reason
    assert "entries are added by the orchestrator" in denied[1].reason
    told = [str(r.tool_results()[0]["content"]) for r in model.requests if r.tool_results()]
    assert any("Denied by the dialogue's orchestrator" in t for t in told)  # the model read why
    assert {r.role: r.denied for r in report.roles}["Architect-2"] == 2
    assert "denied" in (path / ".dialogue" / "tools-a2.log").read_text()


@pytest.mark.parametrize("phrase", [None, "We have reached consensus on the attic."])
async def test_consensus_from_the_first_agent_in_round_two_ends_the_dialogue_after_that_turn(
    make_options, roles, tmp_path, phrase
):
    """The field, or (with `phrase`) the fallback phrase in the content: the second agent does not speak in round
    2, the scribe sums the round up and writes the synthesis."""
    path, events = tmp_path / "talk", []
    async with ScriptedModel(ScriptedDialogue(agree={(2, "Architect-1")}, phrase=phrase)) as model:
        report = await run_dialogue(path, make_options(model), roles, events=events)
    entries = json.loads((path / "dialogue.json").read_text())
    assert [(e["round"], e["role"], e["consensus"]) for e in entries] == [
        (1, "Architect-1", False),
        (1, "Architect-2", False),
        (2, "Architect-1", phrase is None),
    ]
    how = "field" if phrase is None else "phrase: we have reached consensus"
    assert [e for e in events if isinstance(e, ConsensusReached)] == [ConsensusReached(2, "Architect-1", how)]
    assert (report.state, report.consensus_round, report.consensus_role) == (DialogueState.CONSENSUS, 2, "Architect-1")
    synthesis = (path / "consensus_synthesis.md").read_text()
    assert "consensus in round 2, signalled by Architect-1" in synthesis and "Scribe's synthesis" in synthesis
    assert "## Round 2" in (path / "summary.md").read_text() and "## Round 3" not in (path / "summary.md").read_text()
    assert [e.step.key for e in events if isinstance(e, StepFinished)] == [
        "1:agent:Architect-1",
        "1:agent:Architect-2",
        "1:summary:Scribe",
        "2:agent:Architect-1",
        "2:summary:Scribe",
        "synthesis",
    ]


async def test_a_dialogue_json_broken_during_a_turn_is_restored_from_the_last_good_copy_with_a_record(
    make_options, roles, tmp_path
):
    """What the guard cannot see (a file changed behind claude's tools) is caught after the turn."""
    script, path, events = ScriptedDialogue(), tmp_path / "talk", []

    def breaks(request):
        if "Architect-2 Prompt" in request.system and last_tool(request) == "Read":
            (path / "dialogue.json").write_text('[{"round": 1, "role": "Architect-2"')
            return "I wrote it another way."
        return script(request)

    async with ScriptedModel(breaks) as model:
        report = await run_dialogue(path, make_options(model), roles[:2], rounds=1, events=events)
    entries = json.loads((path / "dialogue.json").read_text())
    assert [(e["role"], e["content"]) for e in entries] == [
        ("Architect-1", script.content("Architect-1", 1)),
        ("Architect-2", ""),
    ]
    [restored] = [e for e in events if isinstance(e, FileRestored)]
    assert restored.file == "dialogue.json" and "is broken: it is not JSON" in restored.reason
    [record] = [json.loads(line) for line in (path / ".dialogue" / "restores.jsonl").read_text().splitlines()]
    assert record["file"] == "dialogue.json" and record["step"] == "1:agent:Architect-2"
    assert report.restores == 1 and report.state is DialogueState.FINISHED


async def test_a_turn_that_fails_stops_the_dialogue_which_resumes_each_roles_session_without_repeating_a_turn(
    make_options, roles, tmp_path
):
    """Architect-2 fails in round 2: the resume runs only that turn, in Architect-2's own claude session (its
    round 1 is in the history the model is sent), and Architect-1 is not asked again."""
    script, path = ScriptedDialogue(), tmp_path / "talk"

    def fails(request):
        return (
            ApiError(500, "api_error", "the model is down")
            if "Architect-2 Prompt" in request.system and "Round 2" in instruction_of(request)
            else script(request)
        )

    async with ScriptedModel(fails) as model:
        with pytest.raises(TurnError, match=r"^the turn ended in error: .*the model is down"):  # not "(success)"
            await run_dialogue(path, make_options(model), roles[:2], rounds=2)
    assert json.loads((path / ".dialogue" / "state.json").read_text())["state"] == "failed"
    events = []
    async with ScriptedModel(script) as model:
        report = await run_dialogue(path, make_options(model), resume=True, events=events)
    assert [e.step.key for e in events if isinstance(e, StepStarted)] == ["2:agent:Architect-2"]
    assert {"Architect-2 Prompt" in r.system for r in model.requests} == {True}
    history = [r for r in model.requests if "Round 1, your turn as Architect-2" in json.dumps(r.messages)]
    assert history and len(history) == len(model.requests)  # the session resumed, not a new one
    assert [e["content"] for e in json.loads((path / "dialogue.json").read_text())] == [
        script.content(role, n) for n in (1, 2) for role in ("Architect-1", "Architect-2")
    ]
    assert report.state is DialogueState.FINISHED and {r.role: r.turns for r in report.roles} == {
        "Architect-1": 2,
        "Architect-2": 2,
    }


async def test_a_turn_that_fails_after_spending_part_of_its_cost_is_not_billed_again_to_the_turn_run_after_it(
    make_options, roles, tmp_path
):
    """Architect-2's round 2 reads (one request billed), then the model fails. claude's session total, which the
    resumed claude carries on from, holds that read; the ledger does not (the turn never finished). The turn run
    again costs what its own requests cost (the scripted model bills each request alike: a whole turn is three,
    Read, Edit and the last word), and the role's total is its finished turns'."""
    script, path = ScriptedDialogue(), tmp_path / "talk"

    def fails(request):
        return (
            ApiError(500, "api_error", "the model is down")
            if "Architect-2 Prompt" in request.system
            and "Round 2" in instruction_of(request)
            and last_tool(request) == "Read"
            else script(request)
        )

    first = []
    async with ScriptedModel(fails) as model:
        with pytest.raises(TurnError, match="the model is down"):
            await run_dialogue(path, make_options(model), roles[:2], rounds=2, events=first)
    [turn] = {round(e.cost_usd, 9) for e in first if isinstance(e, StepFinished)}  # every whole turn alike
    assert turn > 0
    events = []
    async with ScriptedModel(script) as model:
        report = await run_dialogue(path, make_options(model), resume=True, events=events)
    [again] = [e for e in events if isinstance(e, StepFinished)]
    assert again.step.key == "2:agent:Architect-2" and model.requests
    assert round(again.cost_usd, 6) == round(turn / 3 * len(model.requests), 6)
    assert {r.role: (r.turns, round(r.cost_usd, 6)) for r in report.roles} == {
        "Architect-1": (2, round(2 * turn, 6)),
        "Architect-2": (2, round(turn + again.cost_usd, 6)),
    }


async def test_the_first_entry_of_a_dialogue_cannot_end_it_there_is_no_one_to_agree_with(make_options, roles, tmp_path):
    async with ScriptedModel(ScriptedDialogue(agree={(1, "Architect-1")})) as model:
        report = await run_dialogue(tmp_path / "talk", make_options(model), roles[:2], rounds=1)
    assert report.consensus_round is None and report.entries == 2 and report.state is DialogueState.FINISHED
    assert json.loads((tmp_path / "talk" / "dialogue.json").read_text())[0]["consensus"] is True  # kept as written


def test_a_summary_broken_by_hand_before_a_resume_is_refused_naming_its_good_copy_and_nothing_changes(roles, tmp_path):
    """Not only dialogue.json: a summary.md that is no longer text stops the resume before any claude starts."""
    path = tmp_path / "talk"
    Dialogue.create(path, QUESTION, roles).close()
    (path / "summary.md").write_bytes(b"# Summary\n\xff\xfe\x00")
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pytest.raises(DialogueFileError, match=r"summary.md is not UTF-8 text\. The last good copy is .*good/summary"):
        Dialogue.resume(path)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


def test_a_dialogue_under_way_is_not_taken_up_by_another_resume_until_it_lets_go(roles, tmp_path):
    """Two runs on one directory would write over each other's steps: the second is refused, changing nothing;
    the lock goes with the run (a kill -9 lets it go too: the kernel drops it with the process)."""
    path = tmp_path / "talk"
    first = Dialogue.create(path, QUESTION, roles)
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pytest.raises(DialogueFileError, match="is being run by another process now"):
        Dialogue.resume(path)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    first.close()
    second = Dialogue.resume(path)
    with pytest.raises(DialogueFileError, match="is being run by another process now"):
        Dialogue.resume(path)
    second.close()


async def test_a_dialogue_in_a_folder_whose_path_has_spaces_is_filled_by_the_scripted_model(
    make_options, roles, tmp_path
):
    """The instruction's paths are quoted, so a model (the scripted one too) finds them whole: `My Talks/`."""
    path, script = tmp_path / "My Talks" / "on the lantern", ScriptedDialogue()
    async with ScriptedModel(script) as model:
        report = await run_dialogue(path, make_options(model), roles[:2], rounds=1)
    assert [e["content"] for e in json.loads((path / "dialogue.json").read_text())] == [
        script.content("Architect-1", 1),
        script.content("Architect-2", 1),
    ]
    assert report.state is DialogueState.FINISHED and {r.role: r.tools for r in report.roles} == {
        "Architect-1": 2,
        "Architect-2": 2,
    }


def test_a_ledger_with_a_state_it_cannot_have_is_refused_on_resume(roles, tmp_path):
    """The ledger's state is one of DialogueState's: a hand-edited one is a clear error, not a crash at the end."""
    path = tmp_path / "talk"
    Dialogue.create(path, QUESTION, roles).close()
    ledger = path / ".dialogue" / "state.json"
    ledger.write_text(ledger.read_text().replace('"state": "running"', '"state": "done-ish"'))
    with pytest.raises(DialogueFileError, match=r"state.json is broken: state: Input should be 'running', 'consensus'"):
        Dialogue.resume(path)


def test_a_broken_record_of_the_orchestrators_own_is_a_clear_error_on_resume_and_changes_nothing(roles, tmp_path):
    """The last good copy in .dialogue/ broken (by hand, by a disk): no traceback, no guess, nothing written."""
    path = tmp_path / "talk"
    Dialogue.create(path, QUESTION, roles).close()
    (path / ".dialogue" / "good" / "dialogue.json").write_text("[{")
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pytest.raises(DialogueFileError, match=r"the orchestrator's record .*good/dialogue.json is broken \(it is"):
        Dialogue.resume(path)
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before
    with pytest.raises(DialogueFileError, match="the orchestrator's record"):  # again: the refusal let the lock go
        Dialogue.resume(path)


def cut_off(path, roles, *, cut: bool = True) -> None:
    """A dialogue whose first entry is finished and whose second turn a kill cut off right after the orchestrator
    wrote its skeleton (before the good copy took it); `cut=False`: the second turn finished too."""
    dialogue = Dialogue.create(path, QUESTION, roles)
    for step, content in ((Step("agent", 1, "Architect-1"), "The attic."), (Step("agent", 1, "Architect-2"), "Aye.")):
        dialogue.dir.begin(dialogue.ledger, step.key)
        dialogue._skeleton(step)
        if step.role == "Architect-2" and cut:
            break
        *earlier, last = dialogue.dir.entries()
        dialogue.dir.write_entries([*earlier, last.model_copy(update={"content": content})])
        dialogue.dir.keep_good()
        dialogue.dir.finish(dialogue.ledger, step.key)
    dialogue.close()


def files_of(path) -> dict:
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize("cut", [True, False], ids=["a-turn-cut-off", "between-turns"])
@pytest.mark.parametrize(("field", "value"), [("content", "TAMPERED"), ("consensus", True)])
def test_a_finished_entry_edited_by_hand_before_a_resume_is_refused_naming_it_and_nothing_changes(
    roles, tmp_path, cut, field, value
):
    """The rewind of a cut-off turn used to put the entry back without a word (and between turns the edit stood):
    the docs promise a dialogue.json that is not the record is refused, as it is when a role is changed."""
    path = tmp_path / "talk"
    cut_off(path, roles, cut=cut)
    dialogue = path / "dialogue.json"
    kept = dialogue.read_text()
    entries = json.loads(kept)
    entries[0][field] = value
    dialogue.write_text(json.dumps(entries, indent=2))
    before = files_of(path)
    with pytest.raises(
        DialogueFileError,
        match=rf"dialogue.json does not match the orchestrator's record: entry 1's {field} is not what was written "
        r"in its turn .*\. The last good copy is .*good/dialogue.json: put it back",
    ):
        Dialogue.resume(path)
    assert files_of(path) == before and not (path / ".dialogue" / "restores.jsonl").exists()
    dialogue.write_text(kept)  # put back: the resume goes on (a cut-off turn's own skeleton is no edit)
    events = []
    Dialogue.resume(path, on_event=events.append).close()
    assert events == [Resumed(done=1 if cut else 2, rewound="1:agent:Architect-2" if cut else None)]
    assert len(json.loads(dialogue.read_text())) == (1 if cut else 2)


@pytest.mark.parametrize("name", ["question.md", "summary.md"])
def test_a_question_or_summary_deleted_before_a_resume_is_refused_naming_its_good_copy_and_nothing_changes(
    roles, tmp_path, name
):
    """An agent is told to read question.md: a resume without it would run agents on a question they cannot read."""
    path = tmp_path / "talk"
    cut_off(path, roles)
    (path / name).unlink()
    before = files_of(path)
    with pytest.raises(
        DialogueFileError, match=rf"{name} is missing\. The last good copy is .*good/{name}: put it back"
    ):
        Dialogue.resume(path)
    assert files_of(path) == before
    (path / name).write_bytes((path / ".dialogue" / "good" / name).read_bytes())
    Dialogue.resume(path).close()
    assert (path / "question.md").read_text() == QUESTION


@pytest.mark.parametrize(
    ("checkpoint", "why"),
    [
        ("{", "Invalid JSON"),
        ('{"step": "1:agent:Architect-1", "files": {}}', "it is of step '1:agent:Architect-1'"),
        (
            '{"step": "1:agent:Architect-2", "files": {"../x.md": "y"}}',
            "it names '../x.md', not one of the agents' files",
        ),
    ],
)
def test_a_broken_checkpoint_of_the_turn_cut_off_is_named_on_resume_rather_than_dialogue_json(
    roles, tmp_path, checkpoint, why
):
    path = tmp_path / "talk"
    cut_off(path, roles)
    (path / ".dialogue" / "checkpoint.json").write_text(checkpoint)
    before = files_of(path)
    with pytest.raises(DialogueFileError) as refused:
        Dialogue.resume(path)
    message = str(refused.value)
    assert message.startswith(f"the orchestrator's record {path.resolve()}/.dialogue/checkpoint.json is broken (")
    assert why in message and "the step 1:agent:Architect-2 that was cut off cannot be run again" in message
    assert "does not match" not in message and files_of(path) == before


WRITER = """
import sys
from pathlib import Path
from frobozz._files import atomic_file
with atomic_file(Path(sys.argv[1])) as f:
    f.write('{"step": "half')
    f.flush()
    print("halfway", flush=True)
    sys.stdin.read()
"""


def test_a_resume_takes_away_the_temporary_file_a_writer_killed_halfway_left_and_only_that(roles, tmp_path):
    """A kill -9 in the middle of a checkpoint's write leaves `.checkpoint.json.XXXXXXXX.tmp` beside it; the resume
    takes it away (and the like beside the other files the orchestrator writes), never a file of another pattern."""
    path = tmp_path / "talk"
    cut_off(path, roles)
    checkpoint = path / ".dialogue" / "checkpoint.json"
    kept = checkpoint.read_bytes()
    writer = pexpect.spawn(sys.executable, ["-c", WRITER, str(checkpoint)], encoding="utf-8", timeout=60)
    writer.expect_exact("halfway")
    writer.kill(signal.SIGKILL)
    writer.expect(pexpect.EOF)
    [left] = [p for p in checkpoint.parent.iterdir() if p.name.endswith(".tmp")]
    assert left.name.startswith(".checkpoint.json.") and checkpoint.read_bytes() == kept
    others = [
        path / ".dialogue.json.k3x9q2a_.tmp",  # (as a kill halfway through the skeleton's write leaves)
        path / ".dialogue" / "good" / ".summary.md.0a1b2c3d.tmp",
    ]
    theirs = [
        path / ".notes.md.k3x9q2a_.tmp",  # a file of the user's own
        path / ".dialogue" / ".checkpoint.json.tmp",
        path / ".dialogue" / ".checkpoint.json.k3x9q2a_.tmp.keep",
    ]
    for p in (*others, *theirs):
        p.write_text("x")
    Dialogue.resume(path).close()
    assert not left.exists() and not [p for p in others if p.exists()]
    assert [p for p in theirs if p.exists()] == theirs and checkpoint.read_bytes() == kept
