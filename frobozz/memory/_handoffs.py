"""The letters' SQL (parameterised only): write one, read the latest, one by id, or a list."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from .. import _spans
from ._records import utf8_text
from ._store import Memory, MemoryStore
from .exceptions import MemoryStoreError

MAX_ITEMS, MAX_ITEM_CHARS = 100, 10_000
_COLUMNS = "id, namespace, session_id, summary, next_steps, memory_ids, created_at"


@dataclass(frozen=True)
class Letter:
    id: int
    namespace: str
    session_id: str | None
    summary: str
    next_steps: list[str]
    memories: list[Memory]  # those still kept (a brief list, `recent`, reads none)
    created_at: datetime
    memory_ids: list[int]  # every memory the letter named


class HandoffStore:
    """Letters live in cortex's database; the memories a letter lists are cortex memories, so a
    later `search` finds them too."""

    def __init__(self, memories: MemoryStore, *, max_chars: int) -> None:
        self.memories = memories
        self.max_chars = max_chars

    def _items(self, what: str, items: list[str] | None) -> list[str]:
        items = list(items or [])
        if len(items) > MAX_ITEMS:
            raise MemoryStoreError(f"{len(items)} {what} given; at most {MAX_ITEMS} fit in one letter")
        for item in items:
            if not item.strip() or len(item) > MAX_ITEM_CHARS or "\0" in item:
                raise MemoryStoreError(
                    f"each of the {what} must be 1-{MAX_ITEM_CHARS} characters of text, "
                    f"without NUL characters: {item[:60]!r} is not"
                )
            utf8_text(item, f"one of the {what}")
        return items

    async def write(
        self,
        summary: str,
        next_steps: list[str] | None,
        memories: list[str] | None,
        namespace: str | None,
        session_id: str | None,
    ) -> tuple[int, list[int]]:
        """Everything is checked before anything is written; the memories are stored first (a retry
        after a failure finds them as duplicates), then the letter naming them, which is the commit."""
        if not summary or not summary.strip():
            raise MemoryStoreError("the summary is empty: say what was done and where things stand")
        if len(summary) > self.max_chars or "\0" in summary:
            raise MemoryStoreError(f"the summary must be at most {self.max_chars} characters, without NUL characters")
        utf8_text(summary, "the summary")
        steps, remember = self._items("next steps", next_steps), self._items("memories", memories)
        ns = self.memories.namespace(namespace)
        metadata = {"handoff_session": session_id} if session_id else {}
        memory_ids = []
        with _spans.span(
            _spans.HANDOFF_WRITE,
            attributes={
                _spans.MEMORY_NAMESPACE: ns,
                _spans.HANDOFF_NEXT_STEPS: len(steps),
                _spans.HANDOFF_MEMORIES: len(remember),
                _spans.HANDOFF_SUMMARY_CHARS: len(summary),
                **({_spans.SESSION_ID: session_id} if session_id else {}),
            },
        ) as span:
            for text in remember:
                memory, duplicate = await self.memories.store(text, metadata, ns, source="handoff")
                memory_ids.append(duplicate or memory.id)
            async with self.memories.connection() as c:
                letter_id = await c.fetchval(
                    "INSERT INTO handoffs (namespace, session_id, summary, next_steps, memory_ids) "
                    "VALUES ($1, $2, $3, $4::jsonb, $5) RETURNING id",
                    ns,
                    session_id,
                    summary,
                    json.dumps(steps),
                    memory_ids,
                )
            span.set_attributes({_spans.HANDOFF_ID: letter_id, _spans.MEMORY_IDS: memory_ids})
        return letter_id, memory_ids

    async def latest(self, namespace: str | None) -> Letter | None:
        ns = self.memories.namespace(namespace)
        with _spans.span(_spans.HANDOFF_READ, attributes={_spans.MEMORY_NAMESPACE: ns}) as span:
            async with self.memories.connection() as c:
                row = await c.fetchrow(
                    f"SELECT {_COLUMNS} FROM handoffs WHERE namespace = $1 ORDER BY created_at DESC, id DESC LIMIT 1",
                    ns,
                )
            return None if row is None else _read(span, await self._letter(row))

    async def read(self, letter_id: int) -> Letter:
        with _spans.span(_spans.HANDOFF_READ, attributes={_spans.HANDOFF_ID: letter_id}) as span:
            async with self.memories.connection() as c:
                row = await c.fetchrow(f"SELECT {_COLUMNS} FROM handoffs WHERE id = $1", letter_id)
            if row is None:
                raise MemoryStoreError(f"no handoff {letter_id}: list_handoffs shows the ones there are")
            return _read(span, await self._letter(row))

    async def recent(self, limit: int, namespace: str | None) -> list[Letter]:
        async with self.memories.connection() as c:
            rows = await c.fetch(
                f"SELECT {_COLUMNS} FROM handoffs WHERE namespace = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
                self.memories.namespace(namespace),
                limit,
            )
        return [_letter(row, []) for row in rows]

    async def _letter(self, row: asyncpg.Record) -> Letter:
        memories = []
        for memory_id in row["memory_ids"]:
            try:
                memories.append(await self.memories.get(memory_id))
            except MemoryStoreError:
                pass  # forgotten since the letter was written
        return _letter(row, memories)


def _read(span: _spans.Span, letter: Letter) -> Letter:
    """The letter read, its sizes on its span (never its text)."""
    span.set_attributes(
        {
            _spans.HANDOFF_ID: letter.id,
            _spans.MEMORY_NAMESPACE: letter.namespace,
            _spans.HANDOFF_NEXT_STEPS: len(letter.next_steps),
            _spans.HANDOFF_MEMORIES: len(letter.memories),
            _spans.HANDOFF_SUMMARY_CHARS: len(letter.summary),
            _spans.MEMORY_FOUND: 1,
        }
    )
    return letter


def _letter(row: asyncpg.Record, memories: list[Memory]) -> Letter:
    steps = row["next_steps"]
    return Letter(
        id=row["id"],
        namespace=row["namespace"],
        session_id=row["session_id"],
        summary=row["summary"],
        next_steps=json.loads(steps) if isinstance(steps, str) else list(steps),
        memories=memories,
        created_at=row["created_at"],
        memory_ids=list(row["memory_ids"]),
    )
