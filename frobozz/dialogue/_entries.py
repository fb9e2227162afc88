"""`dialogue.json`: a list of entries `{round, role, timestamp, content, consensus}`. The orchestrator writes
each entry's metadata (the skeleton); an agent fills only the last entry's `content` and `consensus`. This
module parses the file, says what is wrong with it, and checks a proposed new text against the current one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, TypeAdapter, ValidationError

from ._text import inert

FIELDS = ("round", "role", "timestamp", "content", "consensus")
METADATA = ("round", "role", "timestamp")


class Entry(BaseModel):
    """One entry of dialogue.json, strictly typed (a model's `"round": "2"` is an error, not a 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    round: StrictInt
    role: StrictStr
    timestamp: StrictStr
    content: StrictStr = ""
    consensus: StrictBool = False  # absent in dialogues written before it: the fallback phrases count then


_ENTRIES = TypeAdapter(list[Entry])


def skeleton(round_: int, role: str) -> Entry:
    """An entry as the orchestrator makes it: metadata set, content empty."""
    return Entry(round=round_, role=role, timestamp=datetime.now(UTC).isoformat(timespec="seconds"))


def dump(entries: list[Entry]) -> str:
    """The file's text: one field a line, so an Edit can name the last entry's `content` exactly."""
    return json.dumps([e.model_dump() for e in entries], indent=2, ensure_ascii=False) + "\n"


def parse(text: str) -> list[Entry]:
    """The entries, or ValueError saying what is wrong (in words a model or a user can act on)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"it is not JSON ({e})") from e
    if not isinstance(data, list):
        raise ValueError("it must be a JSON list of entries")
    try:
        return _ENTRIES.validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = inert(".".join(str(p) for p in first["loc"]), 60)  # a key the model wrote: shown as data
        raise ValueError(f"entry field {where}: {first['msg']}") from e


def metadata_changes(before: list[Entry], after: list[Entry], max_content: int | None = None) -> str | None:
    """Why `after` is not `before` with only the last entry's content and consensus changed, or its content is
    longer than `max_content` (None: it is fine)."""
    if len(after) > len(before):
        return "entries are added by the orchestrator, not by agents"
    if len(after) < len(before):
        return "entries may not be removed"
    for n, (old, new) in enumerate(zip(before, after, strict=True), start=1):
        last = n == len(before)
        for name in FIELDS:
            if getattr(old, name) != getattr(new, name) and (not last or name in METADATA):
                whose = "the orchestrator's" if name in METADATA else "an earlier turn's"
                return f"entry {n}'s {name} is {whose}: only the last entry's content and consensus may change"
    if max_content is not None and after and len(after[-1].content) > max_content:
        return (
            f"the last entry's content would be {len(after[-1].content)} characters; the limit is {max_content} "
            "(FROBOZZ_DIALOGUE_MAX_CONTENT_CHARS): write it shorter"
        )
    return None


def check_new_text(current: str, proposed: str, max_content: int | None = None) -> str | None:
    """Why an agent may not turn `current` into `proposed` (None: it may)."""
    try:
        before = parse(current)
    except ValueError:
        return "dialogue.json is broken now; the orchestrator restores it after this turn: do not edit it"
    try:
        after = parse(proposed)
    except ValueError as e:
        return f"the edit would break dialogue.json: {e}"
    return metadata_changes(before, after, max_content)
