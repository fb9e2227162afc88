"""Moving many memories at once: import (batched embedding), export, and re-embedding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, NoReturn

from ._database import HNSW_INDEX
from ._records import COLUMNS, CURRENT, content_hash, memory
from ._store import REFRESH, MemoryStore
from .exceptions import MemoryStoreError


class BulkStore:
    """Moving many memories at once: import (batched embedding), export, and re-embedding."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._ids: dict[int, int] = {}  # an exported memory's id -> its id here, so chains survive (any batch)

    async def import_batch(self, records: list[dict[str, Any]], default_namespace: str | None) -> tuple[int, int]:
        """Store a batch of {content, metadata?, namespace?, source?, created_at?, id?, valid_to?, supersedes?};
        (stored, duplicates). A record that names the exported `id` of the one it `supersedes` is linked to
        it, whatever batch that one came in (an export lists the older first)."""
        s = self.store
        rows = [self.check(record, default_namespace) for record in records]
        vectors = await s.embedder.embed([r[1] for r in rows])
        added: dict[str, list[int]] = {}
        async with s.connection() as c, c.transaction():
            for (ns, content, meta, source, created, valid_to, old_id, supersedes), vector in zip(rows, vectors,
                                                                                                  strict=True):
                digest = content_hash(content)
                if valid_to is not None:  # a superseded version: the same one imported twice is kept once
                    row = await c.fetchrow("SELECT id, false AS new FROM memories WHERE namespace = $1 AND "
                                           "content_hash = $2 AND valid_to = $3 AND deleted_at IS NULL", ns, digest,
                                           valid_to)
                else:
                    row = None
                row = row or await c.fetchrow(
                    "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding, created_at, "
                    "updated_at, valid_to, supersedes) VALUES ($1, $2, $3, $4::jsonb, $5, $6, COALESCE($7, now()), "
                    f"COALESCE($7, now()), $8, $9) ON CONFLICT (namespace, content_hash) WHERE {CURRENT} DO NOTHING "
                    "RETURNING id, true AS new", ns, content, digest, meta, source, vector, created, valid_to,
                    self._ids.get(supersedes) if supersedes is not None else None)
                if row is None:  # the same current text is here already
                    row = await c.fetchrow(f"SELECT id, false AS new FROM memories WHERE namespace = $1 AND "
                                           f"content_hash = $2 AND {CURRENT}", ns, digest)
                if row is None:  # and forgotten since
                    raise MemoryStoreError(f"a memory of namespace {ns} was stored and forgotten meanwhile; "
                                           "nothing was imported: try again")
                if row["new"]:
                    added.setdefault(ns, []).append(row["id"])
                    if supersedes in self._ids:
                        await c.execute("UPDATE memories SET superseded_by = $2 WHERE id = $1 AND superseded_by IS NULL",
                                        self._ids[supersedes], row["id"])
                if old_id is not None:
                    self._ids[old_id] = row["id"]
            for ns, ids in sorted(added.items()):
                await c.execute(REFRESH, ns, ids)
        stored = sum(map(len, added.values()))
        return stored, len(rows) - stored

    def check(self, record: Any, default_namespace: str | None) -> tuple[Any, ...]:
        """One record as `import_batch` stores it, or a `MemoryStoreError` saying what is wrong with it (so an
        import can check every line before it stores any)."""
        s = self.store
        if not isinstance(record, dict) or not isinstance(record.get("content"), str):
            raise MemoryStoreError("a memory must be a JSON object with a text 'content'")
        for key in ("namespace", "source"):
            if not isinstance(record.get(key) or "", str):
                raise MemoryStoreError(f"'{key}' must be text")
        if not isinstance(record.get("metadata") or {}, dict):
            raise MemoryStoreError("'metadata' must be a JSON object")
        source = record.get("source") or "import"
        if len(source) > 200 or "\0" in source:
            raise MemoryStoreError("'source' must be at most 200 characters, without NUL characters")
        return (s.namespace(record.get("namespace") or default_namespace), s.content(record["content"]),
                s.metadata(record.get("metadata")), source, _moment(record, "created_at"),
                _moment(record, "valid_to"), _id(record, "id"), _id(record, "supersedes"))

    async def export(self, namespace: str | None) -> AsyncIterator[dict[str, Any]]:
        async with self.store.connection() as c, c.transaction():
            query = (f"SELECT {COLUMNS} FROM memories WHERE deleted_at IS NULL "
                     + ("AND namespace = $1 " if namespace else "") + "ORDER BY id")
            async for row in c.cursor(query, *([self.store.namespace(namespace)] if namespace else [])):
                m = memory(row)
                record = {"id": m.id, "namespace": m.namespace, "content": m.content, "metadata": m.metadata,
                          "source": m.source, "created_at": m.created_at.isoformat(),
                          "updated_at": m.updated_at.isoformat()}
                if m.supersedes is not None or m.valid_to is not None:  # a chain: import links it again
                    record |= {"supersedes": m.supersedes,
                               "valid_to": m.valid_to.isoformat() if m.valid_to else None}
                yield record

    async def count(self, namespace: str | None = None) -> int:
        async with self.store.connection() as c:
            if namespace:
                count: int = await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL "
                                              "AND namespace = $1", self.store.namespace(namespace))
            else:
                count = await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL")
        return count

    async def reembed(self, on_batch: Any = None, batch: int = 128) -> int:
        """Embed every memory again with the configured model, into a new column swapped in at the end,
        so an interrupted re-embedding leaves the old embeddings whole."""
        embedder = self.store.embedder
        async with self.store.connection() as c:
            await c.execute("ALTER TABLE memories DROP COLUMN IF EXISTS embedding_next")
            await c.execute(f"ALTER TABLE memories ADD COLUMN embedding_next vector({int(embedder.dim)})")
            ids = [r["id"] for r in await c.fetch("SELECT id FROM memories ORDER BY id")]
        for start in range(0, len(ids), batch):
            async with self.store.connection() as c:
                rows = await c.fetch("SELECT id, content FROM memories WHERE id = ANY($1::bigint[])", ids[start:start + batch])
                vectors = await embedder.embed([r["content"] for r in rows])
                await c.executemany("UPDATE memories SET embedding_next = $2 WHERE id = $1",
                                    [(r["id"], v) for r, v in zip(rows, vectors, strict=True)])
            if on_batch:
                on_batch(len(rows))
        async with self.store.connection() as c, c.transaction():
            await c.execute("DROP INDEX IF EXISTS memories_embedding")
            await c.execute("ALTER TABLE memories DROP COLUMN embedding")
            await c.execute("ALTER TABLE memories RENAME COLUMN embedding_next TO embedding")
            await c.execute("ALTER TABLE memories ALTER COLUMN embedding SET NOT NULL")
            await c.execute(HNSW_INDEX)
            await c.execute("UPDATE cortex_meta SET value = $1 WHERE key = 'embedding_model'", embedder.model)
            await c.execute("UPDATE cortex_meta SET value = $1 WHERE key = 'embedding_dim'", str(embedder.dim))
        return len(ids)


def _moment(record: dict[str, Any], key: str) -> datetime | None:
    value = record.get(key)
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else _bad(key)
    except ValueError:
        return _bad(key)


def _id(record: dict[str, Any], key: str) -> int | None:
    value = record.get(key)
    if value is None:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else _bad(key)


def _bad(key: str) -> NoReturn:
    raise MemoryStoreError(f"'{key}' must be " + ("an ISO date and time" if key in ("created_at", "valid_to")
                                                  else "a positive memory id"))
