"""Dialogues through the real claude CLI on the scripted model: the agents only Read and Edit files, the
orchestrator writes every entry's metadata, the scribe's summary and synthesis, consensus, and denials."""

from __future__ import annotations

import json

import pytest

from frobozz.dialogue import (ConsensusReached, DialogueState, ScriptedDialogue, StepFinished, ToolDenied,
                              ToolUsed)
from frobozz.engine.testing import ScriptedModel
from tests.dialogue.conftest import QUESTION, run_dialogue

pytestmark = pytest.mark.anyio


def user_texts(request) -> list[str]:
    """What the orchestrator said to the model in a request: its user text blocks (claude's own reminders and
    the tool results, which are the files the agent chose to read, left out)."""
    texts = []
    for message in request.messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [b["text"] for b in blocks if message.get("role") == "user" and b.get("type") == "text"
                  and not b["text"].lstrip().startswith("<system-reminder>")]
    return texts


async def test_two_agents_and_a_scribe_fill_three_rounds_the_orchestrator_writes_the_metadata(
        make_options, roles, tmp_path):
    path, events = tmp_path / "talk", []
    script = ScriptedDialogue()
    async with ScriptedModel(script) as model:
        report = await run_dialogue(path, make_options(model), roles, events=events)
    entries = json.loads((path / "dialogue.json").read_text())
    assert [(e["round"], e["role"]) for e in entries] == [
        (1, "Architect-1"), (1, "Architect-2"), (2, "Architect-1"), (2, "Architect-2"), (3, "Architect-1"),
        (3, "Architect-2")]
    assert [e["content"] for e in entries] == [script.content(e["role"], e["round"]) for e in entries]
    assert not any(e["consensus"] for e in entries) and all(e["timestamp"] for e in entries)
    summary = (path / "summary.md").read_text()
    assert [f"## Round {n}" in summary and f"Scribe's summary of round {n}" in summary for n in (1, 2, 3)] == [True] * 3
    synthesis = (path / "consensus_synthesis.md").read_text()
    assert "no consensus after 3 rounds" in synthesis and "(scripted) Scribe's synthesis." in synthesis
    assert report.state is DialogueState.FINISHED and report.rounds == 3 and report.consensus_round is None
    assert {(r.role, r.turns, r.tools) for r in report.roles} == {
        ("Architect-1", 3, 6), ("Architect-2", 3, 6), ("Scribe", 4, 8)}
    lines = [e.line for e in events if isinstance(e, ToolUsed)]
    assert any(line.startswith("[Tool] Edit: dialogue.json (old: ") for line in lines)
    assert (path / ".dialogue" / "tools-a1.log").read_text().count("[Tool] ") == 6
    # the orchestrator's prompts carry paths, never the dialogue's content
    written = [e["content"] for e in entries] + [QUESTION.strip()]
    for request in model.requests:
        said = "\n".join(user_texts(request)) + request.system
        assert not [w for w in written if w in said]
    assert len([e for e in events if isinstance(e, StepFinished)]) == 10


async def test_an_agent_that_changes_a_role_or_adds_an_entry_is_denied_and_the_metadata_is_kept(
        make_options, roles, tmp_path):
    script = ScriptedDialogue()

    def hostile(request):
        reply = script(request)
        if "Architect-2 Prompt" in request.system and getattr(reply, "blocks", None) \
                and reply.blocks[0].name == "Edit":
            edit = dict(reply.blocks[0].input)
            if '"round": 1' in json.dumps(request.messages):  # round 1: rename its own role; later: add an entry
                edit["new_string"] = edit["new_string"]
                edit["old_string"] = '"role": "Architect-2"'
                edit["new_string"] = '"role": "Architect-1"'
            return type(reply)((type(reply.blocks[0])("Edit", edit),))
        return reply

    path, events = tmp_path / "talk", []
    async with ScriptedModel(hostile) as model:
        report = await run_dialogue(path, make_options(model), roles, rounds=1, events=events)
    entries = json.loads((path / "dialogue.json").read_text())
    assert [(e["round"], e["role"], e["content"]) for e in entries] == [
        (1, "Architect-1", script.content("Architect-1", 1)), (1, "Architect-2", "")]
    denied = [e for e in events if isinstance(e, ToolDenied)]
    assert denied and denied[0].role == "Architect-2" and "role is the orchestrator's" in denied[0].reason
    told = [str(r.tool_results()[0]["content"]) for r in model.requests if r.tool_results()]
    assert any("Denied by the dialogue's orchestrator" in t for t in told)  # the model read why
    assert {r.role: r.denied for r in report.roles}["Architect-2"] == 1
