"""The memory loop's records in Postgres (migration 005), beside the memories: sessions, the archive of
everything said in them (written as it happens, searchable by text and date), the memories already
shown in each (so a resumed session does not repeat itself), the facts waiting to be stored, and
the capsules summarising recent conversation.

What was said is kept whatever it holds: a NUL (which Postgres' text cannot hold) is taken out and a lone
surrogate (a byte that was not UTF-8, read with surrogateescape; an unpaired `\\ud800` JSON escape) made U+FFFD,
here, for every caller (`storable`), in the text and in the archive's data alike."""

from __future__ import annotations

import builtins
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

import asyncpg

from ._records import storable
from ._store import MemoryStore
from .exceptions import MemoryStoreError

Kind = Literal["user", "assistant", "tool_use", "tool_result", "usage", "note"]
KINDS: tuple[str, ...] = get_args(Kind)
MAX_ENTRY_CHARS = 200_000
PREVIEW_CHARS = 120
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
_SESSION = "id, namespace, client, claude_session_id, created_at, last_active_at, window_started_at, preview"
_ENTRY = "id, session_id, namespace, turn, kind, content, data, created_at"


@dataclass(frozen=True)
class LoopSession:
    id: str
    namespace: str
    client: str
    claude_session_id: str | None
    created_at: datetime
    last_active_at: datetime
    window_started_at: datetime
    preview: str


@dataclass(frozen=True)
class ArchiveEntry:
    id: int
    session_id: str
    namespace: str
    turn: int
    kind: str
    content: str
    created_at: datetime
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Capsule:
    namespace: str
    period: str
    until_id: int
    summary: str
    created_at: datetime


def _session(row: asyncpg.Record) -> LoopSession:
    return LoopSession(**dict(row))


def _entry(row: asyncpg.Record) -> ArchiveEntry:
    data = row["data"]
    return ArchiveEntry(
        id=row["id"],
        session_id=row["session_id"],
        namespace=row["namespace"],
        turn=row["turn"],
        kind=row["kind"],
        content=row["content"],
        created_at=row["created_at"],
        data=json.loads(data) if isinstance(data, str) else dict(data or {}),
    )


class LoopSessionStore:
    """The memory loop's sessions and what hangs off them (archive, seen-sets, pending facts, capsules), on the
    memory store's database and pool; namespaces are checked as the memories' are. Not the engine's
    `SessionStore` protocol: claude's own transcripts are kept by `TranscriptStore`."""

    def __init__(self, memories: MemoryStore) -> None:
        self.memories = memories

    def _id(self, session_id: str) -> str:
        if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
            raise MemoryStoreError(
                f"invalid session id {str(session_id)[:80]!r}: 1-100 letters, digits, '_', '.', ':' or '-', "
                "starting with a letter or digit"
            )
        return session_id

    # -- sessions ----------------------------------------------------------------------------------
    async def open(
        self, namespace: str | None = None, *, client: str = "", session_id: str | None = None
    ) -> LoopSession:
        """A new session, or (given its id) the one to resume, which must exist."""
        if session_id is not None:
            return await self.get(session_id)
        ns = self.memories.namespace(namespace)
        async with self.memories.connection() as c:
            row = await c.fetchrow(
                f"INSERT INTO loop_sessions (id, namespace, client) VALUES ($1, $2, $3) RETURNING {_SESSION}",
                uuid.uuid4().hex,
                ns,
                storable(client[:200]),
            )
        assert row is not None  # an INSERT … RETURNING returns its row
        return _session(row)

    async def adopt(self, session_id: str, namespace: str | None = None, *, client: str = "") -> LoopSession:
        """The session with this id, opened now if it is new: for a client whose sessions have ids of their
        own (Claude Code's hooks key the loop on claude's session id)."""
        ns = self.memories.namespace(namespace)
        async with self.memories.connection() as c:
            await c.execute(
                "INSERT INTO loop_sessions (id, namespace, client) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                self._id(session_id),
                ns,
                storable(client[:200]),
            )
        return await self.get(session_id)

    async def get(self, session_id: str) -> LoopSession:
        async with self.memories.connection() as c:
            row = await c.fetchrow(f"SELECT {_SESSION} FROM loop_sessions WHERE id = $1", self._id(session_id))
        if row is None:
            raise MemoryStoreError(f"no session {session_id}: the list of sessions shows the ones there are")
        return _session(row)

    async def list(self, namespace: str | None = None, *, limit: int = 20) -> list[LoopSession]:
        """The most recently active first; every namespace when none is given."""
        async with self.memories.connection() as c:
            rows = await c.fetch(
                f"SELECT {_SESSION} FROM loop_sessions WHERE ($1::text IS NULL OR namespace = $1) "
                "ORDER BY last_active_at DESC, id LIMIT $2",
                None if namespace is None else self.memories.namespace(namespace),
                max(limit, 0),
            )
        return [_session(r) for r in rows]

    async def namespaces(self) -> builtins.list[str]:
        """The namespaces that have sessions, the most recently active first."""
        async with self.memories.connection() as c:
            rows = await c.fetch(
                "SELECT namespace FROM loop_sessions GROUP BY namespace ORDER BY max(last_active_at) DESC, namespace"
            )
        return [r["namespace"] for r in rows]

    async def set_claude_session(self, session_id: str, claude_session_id: str) -> None:
        async with self.memories.connection() as c:
            await c.execute(
                "UPDATE loop_sessions SET claude_session_id = $2 WHERE id = $1", self._id(session_id), claude_session_id
            )

    async def new_window(self, session_id: str) -> datetime:
        """Mark the start of a context window (session start, or after a compaction): its time."""
        async with self.memories.connection() as c:
            started: datetime | None = await c.fetchval(
                "UPDATE loop_sessions SET window_started_at = clock_timestamp() WHERE id = $1 "
                "RETURNING window_started_at",
                self._id(session_id),
            )
        if started is None:
            raise MemoryStoreError(f"no session {session_id}")
        return started

    # -- the archive -------------------------------------------------------------------------------
    async def archive(
        self, session_id: str, turn: int, kind: Kind, content: str, data: dict[str, Any] | None = None
    ) -> ArchiveEntry:
        """Write one thing said or done, committed before this returns; the session's last activity
        (and, for its first user message, its preview) move with it."""
        if kind not in KINDS:
            raise MemoryStoreError(f"unknown archive kind {kind!r}: one of {', '.join(KINDS)}")
        content = storable(content)[:MAX_ENTRY_CHARS]
        encoded = self.memories.metadata(storable(data))
        async with self.memories.connection() as c, c.transaction():
            row = await c.fetchrow(
                "WITH s AS (UPDATE loop_sessions SET last_active_at = clock_timestamp(), "
                "  preview = CASE WHEN preview = '' AND $3 = 'user' THEN left($4, $6) ELSE preview END "
                "  WHERE id = $1 RETURNING namespace) "
                f"INSERT INTO loop_archive (session_id, namespace, turn, kind, content, data) "
                f"SELECT $1, s.namespace, $2, $3, $4, $5::jsonb FROM s RETURNING {_ENTRY}",
                self._id(session_id),
                turn,
                kind,
                content,
                encoded,
                PREVIEW_CHARS,
            )
        if row is None:
            raise MemoryStoreError(f"no session {session_id}: nothing was archived")
        return _entry(row)

    async def transcript(
        self, session_id: str, *, after_id: int = 0, limit: int = 10_000
    ) -> builtins.list[ArchiveEntry]:
        async with self.memories.connection() as c:
            rows = await c.fetch(
                f"SELECT {_ENTRY} FROM loop_archive WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                self._id(session_id),
                after_id,
                max(limit, 0),
            )
        return [_entry(r) for r in rows]

    async def search_archive(
        self,
        query: str | None = None,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
    ) -> builtins.list[ArchiveEntry]:
        """Entries of a namespace holding every word of `query` (all of them, without one), newest first."""
        ns = self.memories.namespace(namespace)
        words = " & ".join(f"'{w}'" for w in dict.fromkeys(re.findall(r"\w+", (query or "").lower()[:10_000])))
        if query and not words:
            return []
        async with self.memories.connection() as c:
            rows = await c.fetch(
                f"SELECT {_ENTRY} FROM loop_archive WHERE namespace = $1 "
                "AND ($2::text IS NULL OR fts @@ to_tsquery('english', $2)) "
                "AND ($3::timestamptz IS NULL OR created_at >= $3) AND ($4::timestamptz IS NULL OR created_at < $4) "
                "ORDER BY created_at DESC, id DESC LIMIT $5",
                ns,
                words or None,
                since,
                until,
                max(limit, 0),
            )
        return [_entry(r) for r in rows]

    # -- recall's seen-set and suggest's buffer ------------------------------------------------------
    async def unseen(self, session_id: str, memory_ids: builtins.list[int]) -> builtins.list[int]:
        """The memories not yet shown in this session, in the order given."""
        async with self.memories.connection() as c:
            seen = {
                r["memory_id"]
                for r in await c.fetch(
                    "SELECT memory_id FROM loop_seen WHERE session_id = $1 AND memory_id = ANY($2::bigint[])",
                    self._id(session_id),
                    memory_ids,
                )
            }
        return [m for m in memory_ids if m not in seen]

    async def mark_seen(self, session_id: str, memory_ids: builtins.list[int]) -> None:
        async with self.memories.connection() as c:
            try:
                await c.execute(
                    "INSERT INTO loop_seen (session_id, memory_id) SELECT $1, unnest($2::bigint[]) "
                    "ON CONFLICT DO NOTHING",
                    self._id(session_id),
                    memory_ids,
                )
            except asyncpg.ForeignKeyViolationError as e:
                raise MemoryStoreError(f"no loop session {session_id!r}: open one first") from e

    async def suggest(self, session_id: str, facts: builtins.list[str]) -> None:
        facts = [storable(f.strip())[:2_000] for f in facts if f and f.strip()]
        async with self.memories.connection() as c:
            await c.execute(
                "INSERT INTO loop_suggestions (session_id, content) SELECT $1, unnest($2::text[]) "
                "ON CONFLICT (session_id, content) DO NOTHING",
                self._id(session_id),
                facts,
            )

    async def suggestions(self, session_id: str) -> builtins.list[str]:
        async with self.memories.connection() as c:
            rows = await c.fetch(
                "SELECT content FROM loop_suggestions WHERE session_id = $1 AND cleared_at IS NULL ORDER BY id",
                self._id(session_id),
            )
        return [r["content"] for r in rows]

    async def clear_suggestions(self, session_id: str) -> int:
        async with self.memories.connection() as c:
            done = await c.execute(
                "UPDATE loop_suggestions SET cleared_at = now() WHERE session_id = $1 AND cleared_at IS NULL",
                self._id(session_id),
            )
        return int(done.split()[-1])

    # -- capsules ----------------------------------------------------------------------------------
    async def capsule(self, namespace: str | None, period: str) -> Capsule | None:
        async with self.memories.connection() as c:
            row = await c.fetchrow(
                "SELECT namespace, period, until_id, summary, created_at FROM loop_capsules "
                "WHERE namespace = $1 AND period = $2",
                self.memories.namespace(namespace),
                storable(period[:100]),
            )
        return None if row is None else Capsule(**dict(row))

    async def put_capsule(self, namespace: str | None, period: str, until_id: int, summary: str) -> Capsule:
        async with self.memories.connection() as c:
            row = await c.fetchrow(
                "INSERT INTO loop_capsules (namespace, period, until_id, summary) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (namespace, period) DO UPDATE SET until_id = excluded.until_id, "
                "summary = excluded.summary, created_at = now() RETURNING namespace, period, until_id, summary, "
                "created_at",
                self.memories.namespace(namespace),
                storable(period[:100]),
                until_id,
                storable(summary),
            )
        assert row is not None  # an upsert … RETURNING returns its row
        return Capsule(**dict(row))
