"""The guard and the checks under it, on files alone (no claude): what an agent may read and edit, how an
edit of dialogue.json is worked out and judged, the fallback phrases and where they are configured, and the
role headers."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from frobozz.dialogue import (CONSENSUS_PHRASES, Dialogue, DialogueInputError, DialogueSettings, consensus_of,
                              load_roles, read_question, role_of)
from frobozz.dialogue._entries import Entry, dump, metadata_changes, skeleton
from frobozz.dialogue._guard import Guard
from frobozz.dialogue._scripted import EMPTY_LAST
from frobozz.dialogue._tool_log import tool_line
from frobozz.engine import HookInput
from frobozz.engine.observers import ToolCall
from tests.dialogue.conftest import prompt

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
        (call("Edit", file_path=path, old_string='"content": "attic"', new_string='"content": "mine"'),
         "entry 1's content is an earlier turn's"),
        (call("Edit", file_path=path, old_string='"round": 1,\n    "role": "Architect-2"',
              new_string='"round": 2,\n    "role": "Architect-2"'), "entry 2's round is the orchestrator's"),
        (call("Edit", file_path=path, old_string='"round": 1', new_string='"round": 2', replace_all=True),
         "entry 1's round"),
        (call("Edit", file_path=path, old_string="no such text", new_string="x"), "old_string must appear"),
        (call("Edit", file_path=path, old_string="[", new_string="{"), "the edit would break dialogue.json"),
        (call("Write", file_path=path, content="[]"), "entries may not be removed"),
        (call("MultiEdit", file_path=path, edits=[{"old_string": EMPTY_LAST, "new_string": good},
                                                  {"old_string": '"t1"', "new_string": '"t0"'}]),
         "entry 1's timestamp"),
        (call("Edit", file_path=str(folder / "summary.md"), old_string="#", new_string="##"),
         "this role edits only dialogue.json"),
        (call("Read", file_path=str(folder / ".dialogue" / "state.json")), "agents use only"),
        (call("Read", file_path="/etc/passwd"), "agents use only"),
        (call("Read", file_path=str(folder / "sub" / ".." / ".." / "dialogue.json")), "agents use only"),
        (call("Bash", command="ls"), "agents use only"),
    ]
    for event, why in cases:
        permission, reason = await decide(guard, event)
        assert permission == "deny" and why in reason, (event.tool_input, reason)
    assert guard.denials == len(cases)
    assert json.loads((folder / "dialogue.json").read_text())[1]["content"] == ""  # the guard only judges


async def test_keys_and_paths_a_model_wrote_reach_the_live_view_and_the_tool_log_inert(folder):
    """A key the model put in an entry, or a path it tried, holds an escape sequence: the denial reason and the
    tool line show it as data (no control character reaches a terminal or a log)."""
    guard, path = Guard(folder, scribe=False, max_chars=1000), str(folder / "dialogue.json")
    hostile = '"content": "x",\n    "consensus": false, "\\u001b]0;pwned\\u0007\\u001b[2J": 1\n  }\n]'
    permission, reason = await decide(guard, call("Edit", file_path=path, old_string=EMPTY_LAST, new_string=hostile))
    assert permission == "deny" and "Extra inputs are not permitted" in reason and "pwned" in reason
    assert not [c for c in reason if not c.isprintable()], reason
    tried = ToolCall(tool_use_id="toolu_1", name="Read", target="/tmp/\x1b[2J\x1b]0;pwned\x07notes.md",
                     input_size="40 chars in", output_chars=0, duration_ms=3, outcome="denied", started_at=0.0)
    line = tool_line(tried, {"file_path": tried.target})
    assert line.startswith("[Tool] Read: /tmp/?[2J?]0;pwned?notes.md (") and line.isprintable(), line


async def test_the_scribe_edits_the_summary_and_synthesis_never_the_dialogue(folder):
    guard = Guard(folder, scribe=True, max_chars=1000)
    summary = str(folder / "summary.md")
    assert (await decide(guard, call("Edit", file_path=summary, old_string="#", new_string="##")))[0] == "allow"
    permission, reason = await decide(guard, call("Edit", file_path=str(folder / "dialogue.json"),
                                                  old_string=EMPTY_LAST, new_string="x"))
    assert permission == "deny" and "edits only summary.md and consensus_synthesis.md" in reason
    (folder / "dialogue.json").write_text("[{broken")
    agent = Guard(folder, scribe=False, max_chars=1000)
    permission, reason = await decide(agent, call("Edit", file_path=str(folder / "dialogue.json"),
                                                  old_string="broken", new_string="x"))
    assert permission == "deny" and "dialogue.json is broken now" in reason


async def test_a_huge_content_field_or_summary_is_denied_and_the_files_are_unchanged(folder):
    """An entry's content, or the scribe's file, past FROBOZZ_DIALOGUE_MAX_CONTENT_CHARS: denied with the limit,
    before claude writes anything; the same limit holds for the check after the turn."""
    kept = (folder / "dialogue.json").read_text()
    agent = Guard(folder, scribe=False, max_chars=1000)
    huge = f'"content": {json.dumps("x" * 5_000_000)},\n    "consensus": false\n  }}\n]'
    permission, reason = await decide(agent, call("Edit", file_path=str(folder / "dialogue.json"),
                                                  old_string=EMPTY_LAST, new_string=huge))
    assert permission == "deny" and "content would be 5000000 characters; the limit is 1000" in reason
    fits = '"content": "' + "x" * 1000 + '",\n    "consensus": false\n  }\n]'
    assert (await decide(agent, call("Edit", file_path=str(folder / "dialogue.json"), old_string=EMPTY_LAST,
                                     new_string=fits)))[0] == "allow"
    scribe = Guard(folder, scribe=True, max_chars=1000)
    permission, reason = await decide(scribe, call("Edit", file_path=str(folder / "summary.md"),
                                                   old_string="# Summary", new_string="y" * 1001))
    assert permission == "deny" and "summary.md would be 1002 characters; the limit is 1000" in reason
    permission, reason = await decide(scribe, call("Edit", file_path=str(folder / "consensus_synthesis.md"),
                                                   old_string="_pending_", new_string="z"))
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
    assert consensus_of(Entry(round=1, role="A", timestamp="t", content="We have not agreed."),
                        CONSENSUS_PHRASES) is None
    assert consensus_of(Entry(round=1, role="A", timestamp="t", content=""), CONSENSUS_PHRASES) is None
    monkeypatch.setenv("FROBOZZ_DIALOGUE_CONSENSUS_PHRASES", '["the lantern stays"]')
    phrases = DialogueSettings().consensus_phrases
    assert phrases == ("the lantern stays",) and consensus_of(agreed, phrases) is None
    old = json.loads('{"round": 1, "role": "A", "timestamp": "t", "content": "The lantern stays upstairs."}')
    assert consensus_of(Entry(**old), phrases) == "phrase: the lantern stays"  # an entry from before the field


def test_roles_come_from_headers_and_each_is_named_once(tmp_path):
    assert role_of("\n  <Architect-1 Prompt: designs the vault>\nbody") == "Architect-1"
    for text in ("", "Architect-1 Prompt: no brackets", "<Prompt: nameless>", "body\n<Architect-1 Prompt: late>"):
        with pytest.raises(DialogueInputError, match="no role header"):
            role_of(text)
    a, b = prompt(tmp_path / "a.md", "Architect-1"), prompt(tmp_path / "b.md", "architect-1")
    with pytest.raises(DialogueInputError, match="two participants have the role 'architect-1'"):
        load_roles([("a", a), ("b", b)], None, limit=1000)
    with pytest.raises(DialogueInputError, match="at least two agents"):
        load_roles([("a", a)], None, limit=1000)
    with pytest.raises(DialogueInputError, match="the limit is 10"):
        load_roles([("a", a), ("b", b)], None, limit=10)
    with pytest.raises(DialogueInputError, match="cannot read the prompt file"):
        load_roles([("a", a), ("b", tmp_path / "missing.md")], None, limit=1000)
    (tmp_path / "bin.md").write_bytes(b"\xff\xfe<A Prompt: x>")
    with pytest.raises(DialogueInputError, match="not UTF-8"):
        load_roles([("a", a), ("b", tmp_path / "bin.md")], None, limit=1000)


def test_a_binary_question_or_prompt_file_is_refused_naming_it_and_nothing_is_written(tmp_path):
    """A file that decodes as UTF-8 but holds control characters (an executable, a zip) is not a question."""
    binary = tmp_path / "question.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00 why?")
    with pytest.raises(DialogueInputError, match=r"the question file .*question.bin is binary, not text \(it holds"):
        read_question(binary, limit=1000)
    text = tmp_path / "question.md"
    text.write_text("Attic or cellar?\r\n\tWhy?\f\n")
    assert read_question(text, limit=1000) == "Attic or cellar?\n\tWhy?\f\n"
    a, b = prompt(tmp_path / "a.md", "Architect-1"), prompt(tmp_path / "b.md", "Architect-2", "x\x00\x1b[2J")
    with pytest.raises(DialogueInputError, match="the prompt file .*b.md is binary, not text .*U\\+0000"):
        load_roles([("a", a), ("b", b)], None, limit=1000)
    roles = load_roles([("a", a), ("b", prompt(tmp_path / "c.md", "Architect-2"))], None, limit=1000)
    with pytest.raises(DialogueInputError, match="the question is binary"):
        Dialogue.create(tmp_path / "talk", "Attic?\x00", roles)
    assert not (tmp_path / "talk").exists()


def test_a_prompt_saved_with_a_byte_order_mark_keeps_its_header_and_loses_the_mark(tmp_path):
    """Editors on Windows save UTF-8 with a BOM: the header is still the first line, and the mark is not passed on."""
    assert role_of("\ufeff<Architect-1 Prompt: designs the vault>\nbody") == "Architect-1"
    a, b = prompt(tmp_path / "a.md", "Architect-1"), tmp_path / "b.md"
    b.write_bytes("\ufeff<Architect-2 Prompt: the other voice>\r\nArgue.\r\n".encode())
    roles = load_roles([("a", a), ("b", b)], None, limit=1000)
    assert roles[1].name == "Architect-2" and roles[1].prompt == "<Architect-2 Prompt: the other voice>\nArgue.\n"


def test_a_prompt_or_question_from_a_pipe_or_a_device_is_read_only_up_to_its_limit(tmp_path):
    """A pipe or /dev/zero has no size to check before reading: more than the limit is refused, never read whole."""
    fifo = tmp_path / "prompt.fifo"
    os.mkfifo(fifo)

    def feed(data: bytes) -> None:
        try:
            with fifo.open("wb") as f:
                f.write(data)
        except BrokenPipeError:  # the reader stopped at its limit
            pass

    writer = threading.Thread(target=feed, args=(b"<Architect-2 Prompt: piped>\n" + b"why? " * 1000,))
    writer.start()
    with pytest.raises(DialogueInputError, match="prompt.fifo is more than 1000 bytes; the limit is 1000"):
        load_roles([("a", prompt(tmp_path / "a.md", "Architect-1")), ("b", fifo)], None, limit=1000)
    writer.join(timeout=60)
    with pytest.raises(DialogueInputError, match="is more than 1000 bytes"):
        read_question(Path("/dev/zero"), limit=1000)
    writer = threading.Thread(target=feed, args=(b"Attic or cellar?\r\n",))
    writer.start()
    assert read_question(fifo, limit=1000) == "Attic or cellar?\n"  # `--question /dev/stdin` works
    writer.join(timeout=60)
