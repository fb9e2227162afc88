"""The guard and the checks under it, on files alone (no claude): what an agent may read and edit, how an
edit of dialogue.json is worked out and judged (sizes too), what a model wrote shown inert, and the fallback
phrases and where they are configured."""

from __future__ import annotations

import json

import pytest

from frobozz.dialogue import CONSENSUS_PHRASES, DialogueSettings, consensus_of
from frobozz.dialogue._entries import Entry, dump, metadata_changes, skeleton
from frobozz.dialogue._guard import Guard
from frobozz.dialogue._scripted import EMPTY_LAST
from frobozz.dialogue._tool_log import tool_line
from frobozz.engine import HookInput
from frobozz.engine.observers import ToolCall

pytestmark = pytest.mark.anyio


def call(tool: str, **tool_input) -> HookInput:
    return HookInput(event="PreToolUse", tool_name=tool, tool_input=tool_input, tool_use_id="toolu_1")


@pytest.fixture
def folder(tmp_path):
    entries = [Entry(round=1, role="Architect-1", timestamp="t1", content="attic"), skeleton(1, "Architect-2")]
    (tmp_path / "dialogue.json").write_text(dump(entries))
    (tmp_path / "summary.md").write_text("# Summary\n")
    (tmp_path / ".dialogue").mkdir()
    return tmp_path


async def decide(guard: Guard, event: HookInput) -> tuple[str | None, str]:
    out = await guard.check(event)
    return out.permission, out.reason or ""


async def test_an_agent_fills_only_the_last_entrys_content_and_consensus(folder):
    guard, path = Guard(folder, scribe=False, max_chars=1000), str(folder / "dialogue.json")
    good = '"content": "cellar",\n    "consensus": true\n  }\n]'
    assert await decide(guard, call("Edit", file_path=path, old_string=EMPTY_LAST, new_string=good)) == ("allow", "")
    assert await decide(guard, call("Read", file_path=path)) == ("allow", "")
    cases = [
        (
            call("Edit", file_path=path, old_string='"content": "attic"', new_string='"content": "mine"'),
            "entry 1's content is an earlier turn's",
        ),
        (
            call(
                "Edit",
                file_path=path,
                old_string='"round": 1,\n    "role": "Architect-2"',
                new_string='"round": 2,\n    "role": "Architect-2"',
            ),
            "entry 2's round is the orchestrator's",
        ),
        (
            call("Edit", file_path=path, old_string='"round": 1', new_string='"round": 2', replace_all=True),
            "entry 1's round",
        ),
        (call("Edit", file_path=path, old_string="no such text", new_string="x"), "old_string must appear"),
        (call("Edit", file_path=path, old_string="[", new_string="{"), "the edit would break dialogue.json"),
        (call("Write", file_path=path, content="[]"), "entries may not be removed"),
        (
            call(
                "MultiEdit",
                file_path=path,
                edits=[{"old_string": EMPTY_LAST, "new_string": good}, {"old_string": '"t1"', "new_string": '"t0"'}],
            ),
            "entry 1's timestamp",
        ),
        (
            call("Edit", file_path=str(folder / "summary.md"), old_string="#", new_string="##"),
            "this role edits only dialogue.json",
        ),
        (call("Read", file_path=str(folder / ".dialogue" / "state.json")), "agents use only"),
        (call("Read", file_path="/etc/passwd"), "agents use only"),
        (call("Read", file_path=str(folder / "sub" / ".." / ".." / "dialogue.json")), "agents use only"),
        (call("Read", file_path=str(folder / "dialogue.json") + "\x00.txt"), "agents use only"),
        (call("Read", file_path=["dialogue.json"]), "agents use only"),
        (call("Bash", command="ls"), "agents use only"),
    ]
    for event, why in cases:
        permission, reason = await decide(guard, event)
        assert permission == "deny" and why in reason, (event.tool_input, reason)
    assert guard.denials == len(cases)
    assert json.loads((folder / "dialogue.json").read_text())[1]["content"] == ""  # the guard only judges


async def test_a_path_through_a_symlink_names_no_dialogue_file_whichever_way_it_points(folder, tmp_path_factory):
    """A link outside pointing in would let an approved Edit write outside (claude may replace the link); a link
    inside pointing out would read what is not the dialogue's."""
    outside = tmp_path_factory.mktemp("elsewhere")
    (outside / "dialogue.json").symlink_to(folder / "dialogue.json")
    (folder / "question.md").symlink_to("/etc/hostname")
    guard = Guard(folder, scribe=False, max_chars=1000)
    good = '"content": "cellar",\n    "consensus": true\n  }\n]'
    for event in (
        call("Edit", file_path=str(outside / "dialogue.json"), old_string=EMPTY_LAST, new_string=good),
        call("Read", file_path=str(outside / "dialogue.json")),
        call("Read", file_path=str(folder / "question.md")),
    ):
        permission, reason = await decide(guard, event)
        assert permission == "deny" and "agents use only" in reason, event.tool_input
    assert (await decide(guard, call("Read", file_path=str(folder / "dialogue.json"))))[0] == "allow"


async def test_keys_and_paths_a_model_wrote_reach_the_live_view_and_the_tool_log_inert(folder):
    """A key the model put in an entry, or a path it tried, holds an escape sequence: the denial reason and the
    tool line show it as data (no control character reaches a terminal or a log)."""
    guard, path = Guard(folder, scribe=False, max_chars=1000), str(folder / "dialogue.json")
    hostile = '"content": "x",\n    "consensus": false, "\\u001b]0;pwned\\u0007\\u001b[2J": 1\n  }\n]'
    permission, reason = await decide(guard, call("Edit", file_path=path, old_string=EMPTY_LAST, new_string=hostile))
    assert permission == "deny" and "Extra inputs are not permitted" in reason and "pwned" in reason
    assert not [c for c in reason if not c.isprintable()], reason
    tried = ToolCall(
        tool_use_id="toolu_1",
        name="Read",
        target="/tmp/\x1b[2J\x1b]0;pwned\x07notes.md",
        input_size="40 chars in",
        output_chars=0,
        duration_ms=3,
        outcome="denied",
        started_at=0.0,
    )
    line = tool_line(tried, {"file_path": tried.target})
    assert line.startswith("[Tool] Read: /tmp/?[2J?]0;pwned?notes.md (") and line.isprintable(), line


async def test_the_scribe_edits_the_summary_and_synthesis_never_the_dialogue(folder):
    guard = Guard(folder, scribe=True, max_chars=1000)
    summary = str(folder / "summary.md")
    assert (await decide(guard, call("Edit", file_path=summary, old_string="#", new_string="##")))[0] == "allow"
    permission, reason = await decide(
        guard, call("Edit", file_path=str(folder / "dialogue.json"), old_string=EMPTY_LAST, new_string="x")
    )
    assert permission == "deny" and "edits only summary.md and consensus_synthesis.md" in reason
    (folder / "dialogue.json").write_text("[{broken")
    agent = Guard(folder, scribe=False, max_chars=1000)
    permission, reason = await decide(
        agent, call("Edit", file_path=str(folder / "dialogue.json"), old_string="broken", new_string="x")
    )
    assert permission == "deny" and "dialogue.json is broken now" in reason


async def test_a_huge_content_field_or_summary_is_denied_and_the_files_are_unchanged(folder):
    """An entry's content, or the scribe's file, past FROBOZZ_DIALOGUE_MAX_CONTENT_CHARS: denied with the limit,
    before claude writes anything; the same limit holds for the check after the turn."""
    kept = (folder / "dialogue.json").read_text()
    agent = Guard(folder, scribe=False, max_chars=1000)
    huge = f'"content": {json.dumps("x" * 5_000_000)},\n    "consensus": false\n  }}\n]'
    permission, reason = await decide(
        agent, call("Edit", file_path=str(folder / "dialogue.json"), old_string=EMPTY_LAST, new_string=huge)
    )
    assert permission == "deny" and "content would be 5000000 characters; the limit is 1000" in reason
    fits = '"content": "' + "x" * 1000 + '",\n    "consensus": false\n  }\n]'
    assert (
        await decide(
            agent, call("Edit", file_path=str(folder / "dialogue.json"), old_string=EMPTY_LAST, new_string=fits)
        )
    )[0] == "allow"
    scribe = Guard(folder, scribe=True, max_chars=1000)
    permission, reason = await decide(
        scribe, call("Edit", file_path=str(folder / "summary.md"), old_string="# Summary", new_string="y" * 1001)
    )
    assert permission == "deny" and "summary.md would be 1002 characters; the limit is 1000" in reason
    permission, reason = await decide(
        scribe, call("Edit", file_path=str(folder / "consensus_synthesis.md"), old_string="_pending_", new_string="z")
    )
    assert permission == "deny" and "does not exist now" in reason
    assert (folder / "dialogue.json").read_text() == kept and (folder / "summary.md").read_text() == "# Summary\n"
    entries = [Entry(round=1, role="A", timestamp="t"), Entry(round=1, role="B", timestamp="t", content="x" * 1001)]
    before = [entries[0], Entry(round=1, role="B", timestamp="t")]
    assert "the limit is 1000" in metadata_changes(before, entries, 1000)  # the check after the turn
    assert DialogueSettings().max_content_chars == 100_000


def test_consensus_is_the_field_or_a_fallback_phrase_and_the_phrases_are_configured_in_one_place(monkeypatch):
    assert consensus_of(Entry(round=1, role="A", timestamp="t", consensus=True), CONSENSUS_PHRASES) == "field"
    agreed = Entry(round=1, role="A", timestamp="t", content="After all this, WE HAVE REACHED\nconsensus.")
    assert consensus_of(agreed, DialogueSettings().consensus_phrases) == "phrase: we have reached consensus"
    assert (
        consensus_of(Entry(round=1, role="A", timestamp="t", content="We have not agreed."), CONSENSUS_PHRASES) is None
    )
    assert consensus_of(Entry(round=1, role="A", timestamp="t", content=""), CONSENSUS_PHRASES) is None
    monkeypatch.setenv("FROBOZZ_DIALOGUE_CONSENSUS_PHRASES", '["the lantern stays"]')
    phrases = DialogueSettings().consensus_phrases
    assert phrases == ("the lantern stays",) and consensus_of(agreed, phrases) is None
    old = json.loads('{"round": 1, "role": "A", "timestamp": "t", "content": "The lantern stays upstairs."}')
    assert consensus_of(Entry(**old), phrases) == "phrase: the lantern stays"  # an entry from before the field


@pytest.mark.parametrize(
    "content",
    ["No consensus reached yet.", "There is still no consensus reached here.", "I cannot say I fully agree with it."],
)
def test_a_fallback_phrase_that_is_negated_is_not_consensus(content):
    assert consensus_of(Entry(round=1, role="A", timestamp="t", content=content), CONSENSUS_PHRASES) is None


def test_a_fallback_phrase_after_a_negated_sentence_is_consensus():
    entry = Entry(round=1, role="A", timestamp="t", content="We did not agree at first. Now: consensus reached.")
    assert consensus_of(entry, CONSENSUS_PHRASES) == "phrase: consensus reached"
