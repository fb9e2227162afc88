"""What the store hands out (memories and search hits, made from database rows), and the text it takes in."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from .exceptions import MemoryStoreError

COLUMNS = "id, namespace, content, metadata, source, created_at, updated_at, valid_to, supersedes, superseded_by"
# the conditions of a memory that is current (not forgotten, not superseded), for `ON CONFLICT` on the unique text
CURRENT = "deleted_at IS NULL AND valid_to IS NULL"


@dataclass(frozen=True)
class Memory:
    id: int
    namespace: str
    content: str
    metadata: dict[str, Any]
    source: str | None
    created_at: datetime
    updated_at: datetime
    valid_to: datetime | None = None  # set once a newer memory superseded this one
    supersedes: int | None = None  # the memory this one replaced
    superseded_by: int | None = None

    @property
    def current(self) -> bool:
        return self.valid_to is None

    def as_json(self) -> dict[str, Any]:
        """Every field, JSON's types (times in ISO 8601): what `cortex get` prints and an export starts from."""
        return {
            "id": self.id,
            "namespace": self.namespace,
            "content": self.content,
            "metadata": self.metadata,
            "source": self.source,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
        }


def before_said(current_again: int | None = None, kept_as_history: int | None = None) -> str | None:
    """What became of the version a forgotten memory superseded, in words (None when it superseded none, or was
    not the current version): the one sentence the CLI, the MCP tool and the web say after a forget."""
    if current_again is not None:
        return f"memory {current_again}, the version it superseded, is current again"
    if kept_as_history is not None:
        return (
            f"memory {kept_as_history}, the version it superseded, stays history: another current memory says "
            "exactly the same"
        )
    return None


@dataclass(frozen=True)
class Forgetting:
    """What `MemoryStore.forget` did: the memory forgotten (as it was), and, when it was the current version of
    a changed fact, the version it superseded: current again, or kept as history (another current memory of its
    namespace says exactly what it says)."""

    memory: Memory
    current_again: int | None = None
    kept_as_history: int | None = None

    @property
    def said(self) -> str | None:
        return before_said(self.current_again, self.kept_as_history)


@dataclass(frozen=True)
class Hit:
    """A memory found by a search: `score` in [0, 1] (see `_search`), `parts` what it is made of."""

    memory: Memory
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    has_image: bool = False  # an image is kept with it (migration 007)


def memory(row: asyncpg.Record) -> Memory:
    metadata = row["metadata"]
    return Memory(
        id=row["id"],
        namespace=row["namespace"],
        content=row["content"],
        metadata=json.loads(metadata) if isinstance(metadata, str) else dict(metadata or {}),
        source=row["source"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        valid_to=row["valid_to"],
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
    )


def utf8_text(value: str, what: str) -> str:
    """`value`, when UTF-8 can hold it (Postgres keeps UTF-8): a lone surrogate cannot be, and JSON's unpaired
    `\\ud800` escapes and undecodable command-line bytes both make one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise MemoryStoreError(
            f"{what} is not valid text: character {e.start + 1} is a lone surrogate "
            "(an unpaired \\ud800-\\udfff escape, or a byte that is not UTF-8)"
        ) from None
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")  # (a str holds a surrogate only unpaired)


def storable(value: Any) -> Any:
    """`value` as Postgres can keep it, for what is kept whatever it holds (what was said, a transcript): in every
    text (a JSON value's keys too) each NUL taken out and each lone surrogate (a byte that was not UTF-8, read
    with surrogateescape; an unpaired `\\ud800` JSON escape) made U+FFFD; the rest as it is."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value.replace("\0", ""))
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def unstorable(text: str) -> bool:
    """Whether Postgres would refuse the text: a NUL, or a lone surrogate (see `utf8_text`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return "\x00" in text


def content_hash(content: str) -> str:
    """The SHA-256 of a memory's text with its whitespace collapsed: the same words stored twice are one memory."""
    return hashlib.sha256(" ".join(content.split()).encode()).hexdigest()


def image_hash(content: str, sha256: str) -> str:
    """A memory with an image: the same words with another image are another memory. `content` is the words as
    given, without the description a vision model added."""
    return content_hash(f"{content}\n\0image {sha256}")


def described(content: str, description: str | None, max_chars: int) -> str:
    """The memory's text with its image's description after it, so words find the image (when it fits)."""
    if not description or description in content:
        return content
    room = max_chars - len(content) - len(DESCRIBED)
    return f"{content}{DESCRIBED}{description[:room]}" if room > 20 else content


DESCRIBED = "\n\nImage: "
