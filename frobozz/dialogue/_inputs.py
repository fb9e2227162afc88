"""The user's input files (the question, the role prompts): read once and checked (size, UTF-8, text rather than
binary), with an error that names the file, before anything is written. One reader for the CLI and the library."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from .exceptions import DialogueInputError

_TEXT_CONTROLS = "\t\n\r\f"  # the control characters a text file holds; any other says it is binary


def check_text(text: str, what: str) -> str:
    """`text`, or DialogueInputError when it holds control characters (a binary file that happens to be UTF-8)."""
    bad = next((c for c in text if unicodedata.category(c) == "Cc" and c not in _TEXT_CONTROLS), None)
    if bad is not None:
        raise DialogueInputError(f"{what} is binary, not text (it holds the control character U+{ord(bad):04X})")
    return text


def check_question(text: str, limit: int, what: str = "the question") -> str:
    """The question as given, or DialogueInputError: empty, larger than `limit` bytes, or not text."""
    size = len(text.encode())
    if size > limit:
        raise DialogueInputError(f"{what} is {size} bytes; the limit is {limit} (FROBOZZ_DIALOGUE_MAX_QUESTION_BYTES)")
    if not text.strip():
        raise DialogueInputError(f"{what} is empty")
    return check_text(text, what)


def read_input(path: Path, what: str, *, limit: int, setting: str) -> str:
    """The text of a file the user gave, or DialogueInputError naming it (too large for `setting`, unreadable,
    not UTF-8, binary)."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise DialogueInputError(f"{what} {path} is {size} bytes; the limit is {limit} ({setting})")
        with path.open("rb") as f:  # at most limit + 1 bytes: a pipe or a device has no size to check first
            data = f.read(limit + 1)
        if len(data) > limit:
            raise DialogueInputError(f"{what} {path} is more than {limit} bytes; the limit is {limit} ({setting})")
        text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")  # as read_text: a BOM is not text
    except UnicodeDecodeError as e:
        raise DialogueInputError(f"{what} {path} is not UTF-8 text") from e
    except OSError as e:
        raise DialogueInputError(f"cannot read {what} {path}: {e.strerror or e}") from e
    return check_text(text, f"{what} {path}")


def read_question(path: Path, *, limit: int) -> str:
    """The question file's text, checked as `Dialogue.create` checks a question."""
    text = read_input(path, "the question file", limit=limit, setting="FROBOZZ_DIALOGUE_MAX_QUESTION_BYTES")
    return check_question(text, limit, f"the question file {path}")
