"""All of cortex's SQL: storing, searching, listing and changing memories (parameterised only).

Search fetches its candidates through the indexes (HNSW for vectors, GIN for full text, matching
every word of the query or any uncommon one) and, in hybrid mode, fuses min-max normalised cosine (0.7) and full-text
rank (0.3), plus a boost when the query's exact phrase appears (see `Fusion`); every score can be
explained by its parts."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import asyncpg

from ..._tasks import both
from ._database import HNSW_INDEX
from ._embeddings import Embedder
from .exceptions import CortexError, DatabaseError, EmbeddingMismatchError

Mode = Literal["hybrid", "semantic", "keyword"]
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
COSINE_WEIGHT, KEYWORD_WEIGHT, PHRASE_BOOST = 0.7, 0.3, 0.1
COMMON_WORD = 0.02  # share of all memories above which a word is too common to fetch a memory alone
_LEXEME = re.compile(r"\w+")
_COLUMNS = "id, namespace, content, metadata, source, created_at, updated_at"
_DOWN = (OSError, asyncpg.InterfaceError, asyncpg.CannotConnectNowError, asyncpg.ConnectionDoesNotExistError,
         asyncpg.PostgresConnectionError)


@dataclass(frozen=True)
class Memory:
    id: int
    namespace: str
    content: str
    metadata: dict[str, Any]
    source: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float
    parts: dict[str, float] = field(default_factory=dict)


def _memory(row: asyncpg.Record) -> Memory:
    metadata = row["metadata"]
    return Memory(id=row["id"], namespace=row["namespace"], content=row["content"],
                  metadata=json.loads(metadata) if isinstance(metadata, str) else dict(metadata or {}),
                  source=row["source"], created_at=row["created_at"], updated_at=row["updated_at"])


def content_hash(content: str) -> str:
    return hashlib.sha256(" ".join(content.split()).encode()).hexdigest()


class MemoryStore:
    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, *, default_namespace: str, max_chars: int) -> None:
        self.pool = pool
        self.embedder = embedder
        self.default_namespace = default_namespace
        self.max_chars = max_chars

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        try:
            async with self.pool.acquire() as connection:
                yield connection
        except _DOWN as e:
            raise DatabaseError(f"the database is not reachable right now ({type(e).__name__}); nothing was "
                                "changed: try again when it is back") from e

    async def check_model(self) -> None:
        async with self._connection() as c:
            meta = {r["key"]: r["value"] for r in await c.fetch("SELECT key, value FROM cortex_meta")}
        if meta.get("embedding_model") != self.embedder.model or int(meta.get("embedding_dim", 0)) != self.embedder.dim:
            raise EmbeddingMismatchError(
                f"the memories were embedded with {meta.get('embedding_model')} ({meta.get('embedding_dim')} dims) "
                f"but {self.embedder.model} ({self.embedder.dim} dims) is configured: configure the same model, "
                "or run `frobozz cortex reembed` to embed every memory again with the new one")

    # -- checks ------------------------------------------------------------------------------------
    def namespace(self, value: str | None) -> str:
        ns = self.default_namespace if value is None else value
        if not _NAMESPACE.fullmatch(ns):
            raise CortexError(f"invalid namespace {ns[:80]!r}: 1-100 letters, digits, '_', '.', ':' or '-'")
        return ns

    def content(self, value: str) -> str:
        if not value or not value.strip():
            raise CortexError("the memory is empty: give it some text")
        if len(value) > self.max_chars:
            raise CortexError(f"the memory is {len(value)} characters; at most {self.max_chars} are kept")
        if "\0" in value:
            raise CortexError("the memory contains a NUL character, which Postgres text cannot hold")
        return value

    @staticmethod
    def metadata(value: dict[str, Any] | None) -> str:
        try:
            encoded = json.dumps(value or {})
        except (TypeError, ValueError) as e:
            raise CortexError(f"metadata must be JSON: {e}") from e
        if len(encoded) > 65536 or "\\u0000" in encoded:
            raise CortexError("metadata must be JSON of at most 64 kB, without NUL characters")
        return encoded

    # -- writing -----------------------------------------------------------------------------------
    async def store(self, content: str, metadata: dict[str, Any] | None = None, namespace: str | None = None,
                    source: str | None = None) -> tuple[Memory, int | None]:
        """The stored memory, and the id of the memory it duplicates (then nothing new is stored)."""
        content, ns, meta = self.content(content), self.namespace(namespace), self.metadata(metadata)
        digest = content_hash(content)
        async with self._connection() as c:
            existing = await c.fetchrow(f"SELECT {_COLUMNS} FROM memories WHERE namespace = $1 AND content_hash = $2 "
                                        "AND deleted_at IS NULL", ns, digest)
        if existing:
            return _memory(existing), existing["id"]
        [vector] = await self.embedder.embed([content])
        async with self._connection() as c:
            row = await c.fetchrow(
                "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding) "
                "VALUES ($1, $2, $3, $4::jsonb, $5, $6) ON CONFLICT (namespace, content_hash) "
                f"WHERE deleted_at IS NULL DO NOTHING RETURNING {_COLUMNS}", ns, content, digest, meta, source, vector)
            if row is None:  # another client stored the same text a moment ago
                row = await c.fetchrow(f"SELECT {_COLUMNS} FROM memories WHERE namespace = $1 AND content_hash = $2 "
                                       "AND deleted_at IS NULL", ns, digest)
                return _memory(row), row["id"]
        return _memory(row), None

    async def update(self, memory_id: int, content: str | None, metadata: dict[str, Any] | None) -> Memory:
        current = await self.get(memory_id)
        new_content = self.content(content) if content is not None else current.content
        meta = self.metadata(metadata if metadata is not None else current.metadata)
        vector = (await self.embedder.embed([new_content]))[0] if content is not None else None
        async with self._connection() as c:
            try:
                row = await c.fetchrow(
                    "UPDATE memories SET content = $2, content_hash = $3, metadata = $4::jsonb, "
                    "embedding = COALESCE($5, embedding), updated_at = now() WHERE id = $1 AND deleted_at IS NULL "
                    f"RETURNING {_COLUMNS}", memory_id, new_content, content_hash(new_content), meta, vector)
            except asyncpg.UniqueViolationError:
                raise CortexError("another memory in this namespace already has that exact text") from None
        if row is None:
            raise CortexError(f"no memory {memory_id}")
        return _memory(row)

    async def forget(self, memory_id: int) -> Memory:
        async with self._connection() as c:
            row = await c.fetchrow(f"UPDATE memories SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL "
                                   f"RETURNING {_COLUMNS}", memory_id)
        if row is None:
            raise CortexError(f"no memory {memory_id} (it may already be forgotten)")
        return _memory(row)

    # -- reading -----------------------------------------------------------------------------------
    async def get(self, memory_id: int) -> Memory:
        async with self._connection() as c:
            row = await c.fetchrow(f"SELECT {_COLUMNS} FROM memories WHERE id = $1 AND deleted_at IS NULL", memory_id)
        if row is None:
            raise CortexError(f"no memory {memory_id}")
        return _memory(row)

    async def recent(self, limit: int, namespace: str | None) -> list[Memory]:
        async with self._connection() as c:
            rows = await c.fetch(f"SELECT {_COLUMNS} FROM memories WHERE namespace = $1 AND deleted_at IS NULL "
                                 "ORDER BY created_at DESC, id DESC LIMIT $2", self.namespace(namespace), limit)
        return [_memory(r) for r in rows]

    async def search(self, query: str, *, limit: int = 10, since: datetime | None = None,
                     until: datetime | None = None, namespace: str | None = None, mode: Mode = "hybrid") -> list[Hit]:
        if not query or not query.strip():
            raise CortexError("the query is empty: say what to look for")
        if len(query) > 10_000:
            raise CortexError("the query is longer than 10,000 characters")
        ns = self.namespace(namespace)
        where = "namespace = $2 AND deleted_at IS NULL AND ($3::timestamptz IS NULL OR created_at >= $3) " \
                "AND ($4::timestamptz IS NULL OR created_at < $4)"
        pool = max(limit * 4, 40)

        async def embed() -> list[float] | None:
            return (await self.embedder.embed([query]))[0] if mode != "keyword" else None

        async def by_words() -> tuple[str, list[asyncpg.Record]]:
            if mode == "semantic":  # semantic scores are cosine alone: no words to look up
                return "", []
            async with self._connection() as c:
                match, rank = await _word_queries(c, query)
                if not match:
                    return rank, []
                return rank, await c.fetch(
                    f"SELECT {_COLUMNS}, ts_rank_cd(fts, $6::tsquery) AS rank FROM memories "
                    f"WHERE fts @@ $1::tsquery AND {where} ORDER BY rank DESC LIMIT $5",
                    match, ns, since, until, pool, rank)

        vector, (rank, keyword) = await both(embed, by_words)  # the CPU embeds while Postgres finds the words
        semantic = []
        if vector is not None:  # the nearest memories, and the cosine of those the words found
            async with self._connection() as c:
                semantic = await c.fetch(
                    f"WITH near AS (SELECT id FROM memories WHERE {where} ORDER BY embedding <=> $1 LIMIT $5) "
                    f"SELECT {_COLUMNS}, 1 - (embedding <=> $1) AS cosine, "
                    "coalesce(ts_rank_cd(fts, $6::tsquery), 0) AS rank FROM memories "
                    "WHERE id IN (SELECT id FROM near UNION ALL SELECT unnest($7::bigint[]))",
                    vector, ns, since, until, pool, rank or None, [r["id"] for r in keyword])
        rows = {r["id"]: r for r in keyword} | {r["id"]: r for r in semantic}
        ranks = [float(r["rank"]) for r in rows.values()]
        cosines = [float(r["cosine"]) for r in rows.values()] if vector is not None else [0.0]
        fusion = Fusion(top_rank=max(ranks, default=0.0) or 1.0, low=min(cosines), high=max(cosines),
                        phrase=" ".join(query.lower().split()))
        hits = [fusion.hit(row, mode) for row in rows.values()]
        return sorted(hits, key=lambda h: (-h.score, -h.memory.id))[:limit]


_LEXEMES = """
WITH q AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', $1))),
common AS (SELECT u.e FROM pg_stats s,
           unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u(e, f)
           WHERE s.schemaname = current_schema() AND s.tablename = 'memories' AND s.attname = 'fts' AND u.f > $2)
SELECT array(SELECT lexeme FROM q ORDER BY lexeme) AS words,
       array(SELECT lexeme FROM q WHERE lexeme NOT IN (SELECT e FROM common WHERE e IS NOT NULL)) AS uncommon"""


async def _word_queries(c: asyncpg.Connection, query: str) -> tuple[str, str]:
    """Two tsqueries (as text) from the query's words: which memories to fetch, and how to rank them.

    Questions ("which restaurant did we pick?") rarely share every word with their answer, so a
    memory is fetched when it has every word or any uncommon one; a word in more than COMMON_WORD
    of all memories only counts beside the others (Postgres's own column statistics say which
    those are: BM25's inverse document frequency, in effect). Ranking counts any word. Only word
    characters pass, so nothing in the text is read as search syntax."""
    text = " ".join(dict.fromkeys(w.lower() for w in _LEXEME.findall(query[:10_000])))
    row = await c.fetchrow(_LEXEMES, text, COMMON_WORD)
    words = [w for w in row["words"] if _LEXEME.fullmatch(w)][:64]
    if not words:
        return "", ""
    uncommon = set(row["uncommon"])
    quoted = [f"'{w}'" for w in words]
    match = "(" + " & ".join(quoted) + ")" + "".join(f" | '{w}'" for w in words if w in uncommon)
    return match, " | ".join(quoted)


@dataclass(frozen=True)
class Fusion:
    """Hybrid scoring, chosen by bench/cortex_quality.py: cosine and the full-text rank, each
    min-max normalised over the candidates, weighted 0.7 and 0.3, plus a boost for the exact phrase.
    Normalising scores rather than ranks keeps a weak word match from counting as much as a strong one."""

    top_rank: float
    low: float
    high: float
    phrase: str

    def hit(self, row: asyncpg.Record, mode: Mode) -> Hit:
        content = " ".join(row["content"].lower().split())
        boost = PHRASE_BOOST if len(self.phrase) >= 3 and self.phrase in content else 0.0
        rank = float(row["rank"])
        keyword = rank / self.top_rank
        if mode == "keyword":
            return Hit(_memory(row), keyword + boost, {"keyword": keyword, "rank": rank, "phrase": boost})
        cosine = float(row["cosine"])
        if mode == "semantic":
            return Hit(_memory(row), cosine, {"cosine": cosine})
        closeness = (cosine - self.low) / ((self.high - self.low) or 1.0)
        score = COSINE_WEIGHT * closeness + KEYWORD_WEIGHT * keyword + boost
        return Hit(_memory(row), score, {"cosine": cosine, "closeness": closeness, "keyword": keyword, "rank": rank,
                                         "phrase": boost})


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
                raise CortexError("each line must be a JSON object with a text 'content'")
            created = record.get("created_at")
            rows.append((s.namespace(record.get("namespace") or default_namespace), s.content(record["content"]),
                         s.metadata(record.get("metadata")), record.get("source") or "import",
                         datetime.fromisoformat(created) if isinstance(created, str) else None))
        vectors = await s.embedder.embed([r[1] for r in rows])
        stored = 0
        async with s._connection() as c, c.transaction():
            for (ns, content, meta, source, created), vector in zip(rows, vectors, strict=True):
                row = await c.fetchrow(
                    "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding, created_at, "
                    "updated_at) VALUES ($1, $2, $3, $4::jsonb, $5, $6, COALESCE($7, now()), COALESCE($7, now())) "
                    "ON CONFLICT (namespace, content_hash) WHERE deleted_at IS NULL DO NOTHING RETURNING id",
                    ns, content, content_hash(content), meta, source, vector, created)
                stored += row is not None
        return stored, len(rows) - stored

    async def export(self, namespace: str | None) -> AsyncIterator[dict[str, Any]]:
        async with self.store._connection() as c, c.transaction():
            query = (f"SELECT {_COLUMNS} FROM memories WHERE deleted_at IS NULL "
                     + ("AND namespace = $1 " if namespace else "") + "ORDER BY id")
            async for row in c.cursor(query, *([self.store.namespace(namespace)] if namespace else [])):
                m = _memory(row)
                yield {"id": m.id, "namespace": m.namespace, "content": m.content, "metadata": m.metadata,
                       "source": m.source, "created_at": m.created_at.isoformat(), "updated_at": m.updated_at.isoformat()}

    async def count(self, namespace: str | None = None) -> int:
        async with self.store._connection() as c:
            if namespace:
                return await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL AND namespace = $1",
                                        self.store.namespace(namespace))
            return await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL")

    async def reembed(self, on_batch: Any = None, batch: int = 128) -> int:
        """Embed every memory again with the configured model, into a new column swapped in at the end,
        so an interrupted re-embedding leaves the old embeddings whole."""
        embedder = self.store.embedder
        async with self.store._connection() as c:
            await c.execute("ALTER TABLE memories DROP COLUMN IF EXISTS embedding_next")
            await c.execute(f"ALTER TABLE memories ADD COLUMN embedding_next vector({int(embedder.dim)})")
            ids = [r["id"] for r in await c.fetch("SELECT id FROM memories ORDER BY id")]
        for start in range(0, len(ids), batch):
            async with self.store._connection() as c:
                rows = await c.fetch("SELECT id, content FROM memories WHERE id = ANY($1::bigint[])", ids[start:start + batch])
                vectors = await embedder.embed([r["content"] for r in rows])
                await c.executemany("UPDATE memories SET embedding_next = $2 WHERE id = $1",
                                    [(r["id"], v) for r, v in zip(rows, vectors, strict=True)])
            if on_batch:
                on_batch(len(rows))
        async with self.store._connection() as c, c.transaction():
            await c.execute("DROP INDEX IF EXISTS memories_embedding")
            await c.execute("ALTER TABLE memories DROP COLUMN embedding")
            await c.execute("ALTER TABLE memories RENAME COLUMN embedding_next TO embedding")
            await c.execute("ALTER TABLE memories ALTER COLUMN embedding SET NOT NULL")
            await c.execute(HNSW_INDEX)
            await c.execute("UPDATE cortex_meta SET value = $1 WHERE key = 'embedding_model'", embedder.model)
            await c.execute("UPDATE cortex_meta SET value = $1 WHERE key = 'embedding_dim'", str(embedder.dim))
        return len(ids)
