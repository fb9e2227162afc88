"""The user's inputs, on files alone (no claude): role headers (odd ones too), each role named once, and the
question and prompt files read within their limits as text (not binary, not from a pipe without end)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from frobozz.dialogue import Dialogue, DialogueInputError, load_roles, read_question, role_of
from tests.dialogue.conftest import prompt


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


@pytest.mark.parametrize("role", ["Lead Architect", "Ärchitect", "Architect:1", "A" * 65])
def test_a_header_whose_role_is_not_one_ascii_word_is_refused_saying_what_a_role_may_be(role):
    """Not "has no role header": the header is there, its role breaks the rule, and the error says the rule."""
    with pytest.raises(DialogueInputError) as refused:
        role_of(f"<{role} Prompt: designs the vault>\nbody", "sp.md")
    assert str(refused.value).startswith(f"sp.md's header names the role {role[:10]!r}"[:41])
    assert "one word of ASCII letters, digits, '-', '_' and '.', starting with a letter" in str(refused.value)
    assert "no role header" not in str(refused.value)


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
    with pytest.raises(DialogueInputError, match=r"the prompt file .*b\.md is binary, not text .*U\+0000"):
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
    with pytest.raises(DialogueInputError, match=r"prompt\.fifo is more than 1000 bytes; the limit is 1000"):
        load_roles([("a", prompt(tmp_path / "a.md", "Architect-1")), ("b", fifo)], None, limit=1000)
    writer.join(timeout=60)
    with pytest.raises(DialogueInputError, match="is more than 1000 bytes"):
        read_question(Path("/dev/zero"), limit=1000)
    writer = threading.Thread(target=feed, args=(b"Attic or cellar?\r\n",))
    writer.start()
    assert read_question(fifo, limit=1000) == "Attic or cellar?\n"  # `--question /dev/stdin` works
    writer.join(timeout=60)
