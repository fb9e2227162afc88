"""Moving many memories at once: import (batched embedding), export, and re-embedding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from ._database import HNSW_INDEX
from ._records import COLUMNS, content_hash, memory
from ._store import REFRESH, MemoryStore
from .exceptions import MemoryStoreError


class BulkStore:
    """Moving many memories at once: import (batched embedding), export, and re-embedding."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def import_batch(self, records: list[dict[str, Any]], default_namespace: str | None) -> tuple[int, int]:
        """Store a batch of {content, metadata?, namespace?, source?, created_at?}; (stored, duplicates)."""
        s = self.store
        rows = []
        for record in records:
            if not isinstance(record, dict) or not isinstance(record.get("content"), str):
                raise MemoryStoreError("each line must be a JSON object with a text 'content'")
            created = record.get("created_at")
            rows.append((s.namespace(record.get("namespace") or default_namespace), s.content(record["content"]),
                         s.metadata(record.get("metadata")), record.get("source") or "import",
                         datetime.fromisoformat(created) if isinstance(created, str) else None))
        vectors = await s.embedder.embed([r[1] for r in rows])
        added: dict[str, list[int]] = {}
        async with s.connection() as c, c.transaction():
            for (ns, content, meta, source, created), vector in zip(rows, vectors, strict=True):
                row = await c.fetchrow(
                    "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding, created_at, "
                    "updated_at) VALUES ($1, $2, $3, $4::jsonb, $5, $6, COALESCE($7, now()), COALESCE($7, now())) "
                    "ON CONFLICT (namespace, content_hash) WHERE deleted_at IS NULL DO NOTHING RETURNING id",
                    ns, content, content_hash(content), meta, source, vector, created)
                if row is not None:
                    added.setdefault(ns, []).append(row["id"])
            for ns, ids in sorted(added.items()):
                await c.execute(REFRESH, ns, ids)
        stored = sum(map(len, added.values()))
        return stored, len(rows) - stored

    async def export(self, namespace: str | None) -> AsyncIterator[dict[str, Any]]:
        async with self.store.connection() as c, c.transaction():
            query = (f"SELECT {COLUMNS} FROM memories WHERE deleted_at IS NULL "
                     + ("AND namespace = $1 " if namespace else "") + "ORDER BY id")
            async for row in c.cursor(query, *([self.store.namespace(namespace)] if namespace else [])):
                m = memory(row)
                yield {"id": m.id, "namespace": m.namespace, "content": m.content, "metadata": m.metadata,
                       "source": m.source, "created_at": m.created_at.isoformat(), "updated_at": m.updated_at.isoformat()}

    async def count(self, namespace: str | None = None) -> int:
        async with self.store.connection() as c:
            if namespace:
                return await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL AND namespace = $1",
                                        self.store.namespace(namespace))
            return await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL")

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
