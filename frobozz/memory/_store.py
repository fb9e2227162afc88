"""Storing, reading and changing memories (parameterised SQL only); search is in `_search`.

Every write refreshes the words in context of the memory's neighbours (migration 004) in the same
transaction, so `store` returns once the memory and everything search reads of it are committed."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import asyncpg
from asyncpg.pool import PoolConnectionProxy

from . import _search
from ._embeddings import Embedder
from ._records import COLUMNS, CURRENT, Forgetting, Hit, Memory, content_hash, described, image_hash, memory, utf8_text
from ._search import Mode
from ._settling import Settler
from .exceptions import DatabaseError, EmbeddingMismatchError, MemoryStoreError

log = logging.getLogger("frobozz.memory")

_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")


# A memory's row and those of the versions either side of it, locked in the order of their ids: two forgets of
# neighbouring versions lock the rows they share in the same order, so one waits for the other (each locking its
# own row first, then its neighbours', they deadlocked).
LOCK_NEIGHBOURS = (
    "SELECT id, supersedes, superseded_by, deleted_at FROM memories WHERE id IN "
    "(SELECT unnest(array[id, supersedes, superseded_by]) FROM memories WHERE id = $1) ORDER BY id FOR UPDATE"
)
FORGET_TRIES = 5  # a forget whose neighbours changed while it was locking them starts again, this many times


class _Moved(Exception):
    """The versions either side of a memory changed while it waited for their rows: locked anew, in order."""


async def _close_chain(c: PoolConnectionProxy, forgotten: asyncpg.Record) -> tuple[int | None, int | None]:
    """The links around a memory just forgotten (in its transaction, its neighbours' rows locked): the version
    before it is linked to the one after it, or is current again when there is none after it; (current again,
    kept as history), what `forget` says."""
    before, after = forgotten["supersedes"], forgotten["superseded_by"]
    if after is not None:
        await c.execute("UPDATE memories SET supersedes = $2 WHERE id = $1", after, before)
    if before is None:
        return None, None
    if after is not None:
        await c.execute("UPDATE memories SET superseded_by = $2 WHERE id = $1", before, after)
        return None, None
    # current again, as when it was stored: unless its text is current meanwhile as another memory (the unique
    # index would refuse it), which stays the fact's current version
    again = await c.fetchval(
        "UPDATE memories p SET valid_to = NULL, superseded_by = NULL WHERE p.id = $1 AND p.deleted_at IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM memories o WHERE o.namespace = p.namespace AND o.content_hash = p.content_hash "
        "AND o.deleted_at IS NULL AND o.valid_to IS NULL) RETURNING p.id",
        before,
    )
    if again is not None:
        return again, None
    kept = await c.fetchval(
        "UPDATE memories SET superseded_by = NULL WHERE id = $1 RETURNING CASE WHEN deleted_at IS NULL THEN id END",
        before,
    )
    return None, kept


def check_namespace(ns: str) -> str:
    """`ns` if it can name a namespace, else MemoryStoreError saying what can (for those who keep one to use
    later, as the plugin's install does, and find out then)."""
    if not _NAMESPACE.fullmatch(ns):
        raise MemoryStoreError(
            f"invalid namespace {ns[:80]!r}: 1-100 letters, digits, '_', '.', ':' or '-', starting with a "
            "letter or digit"
        )
    return ns


_DOWN = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.PostgresConnectionError,
    asyncpg.InternalClientError,
)  # a pooled connection whose server went away, caught mid-use
REFRESH = "SELECT cortex_refresh_context($1, $2::bigint[])"
# Writes count words as deltas (migration 009); every FOLD_EVERY-th memory stored folds them into the totals, so
# search sums a few dozen deltas at most. A fold takes a few milliseconds and makes no writer wait.
FOLD, FOLD_EVERY = "SELECT cortex_fold()", 64
# A stored memory's words into its neighbours' context: a transaction of its own, not flushed to disk before the
# store returns; what a crash loses of it, `cortex_heal` (run when the store is opened) makes again.
SETTLE, HEAL = "SELECT cortex_settle($1, $2::bigint[])", "SELECT cortex_heal()"
# the columns of an image's row (migration 007) that another version of its memory shares
IMAGE_COLUMNS = (
    "media_type, bytes, width, height, sha256, original, thumbnail, thumbnail_width, thumbnail_height, "
    "description, described_by"
)

__all__ = ["Hit", "Memory", "MemoryStore", "Mode", "content_hash"]


class MemoryStore:
    """The memories in Postgres: write, read, search with absolute scores, supersede and forget, by namespace."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: Embedder,
        *,
        default_namespace: str,
        max_chars: int,
        cosine_floor: float = _search.COSINE_FLOOR,
        images_dir: Path | None = None,
    ) -> None:
        """`images_dir`: where memories' image files are kept, so that forgetting one removes its files."""
        self.pool = pool
        self.images_dir = images_dir
        self.embedder = embedder
        self.default_namespace = default_namespace
        self.max_chars = max_chars
        self.cosine_floor = cosine_floor
        self._settler = Settler(self._settle)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PoolConnectionProxy]:
        """A pooled connection; the database's going away, or its refusing a new connection (one not accepting
        connections, dropped or full, a password changed), is a DatabaseError: memory's callers leave memory
        out of that turn and say why."""
        acquired = False
        try:
            async with self.pool.acquire() as connection:
                acquired = True
                yield connection
        except _DOWN as e:
            raise DatabaseError(
                f"the database is not reachable right now ({type(e).__name__}); nothing was "
                "changed: try again when it is back"
            ) from e
        except asyncpg.PostgresError as e:
            if acquired:  # the statement's own error, for its caller
                raise
            raise DatabaseError(  # (one not accepting connections ended a chat); the server says which it is
                f"the database refuses a new connection ({type(e).__name__}: {e}); nothing was changed"
            ) from e

    async def check_model(self) -> None:
        async with self.connection() as c:
            meta = {r["key"]: r["value"] for r in await c.fetch("SELECT key, value FROM cortex_meta")}
        if meta.get("embedding_model") != self.embedder.model or int(meta.get("embedding_dim", 0)) != self.embedder.dim:
            raise EmbeddingMismatchError(
                f"the memories were embedded with {meta.get('embedding_model')} ({meta.get('embedding_dim')} dims) "
                f"but {self.embedder.model} ({self.embedder.dim} dims) is configured: configure the same model, "
                "or run `frobozz cortex reembed` to embed every memory again with the new one"
            )

    async def heal(self) -> int:
        """Refresh the words in context of every live memory that has none (a store whose second step a crash
        lost), with its neighbours', and fold the word counts (forgets and updates count too); how many healed."""
        async with self.connection() as c:
            healed = int(await c.fetchval(HEAL))
            await c.execute(FOLD)
            return healed

    # -- checks ------------------------------------------------------------------------------------
    def namespace(self, value: str | None) -> str:
        return check_namespace(self.default_namespace if value is None else value)

    def content(self, value: str) -> str:
        if not value or not value.strip():
            raise MemoryStoreError("the memory is empty: give it some text")
        if len(value) > self.max_chars:
            raise MemoryStoreError(
                f"the memory is {len(value):,} characters; at most {self.max_chars:,} are kept "
                "(FROBOZZ_CORTEX_MAX_CONTENT_CHARS): store it in smaller parts"
            )
        if "\0" in value:
            raise MemoryStoreError("the memory contains a NUL character, which Postgres text cannot hold")
        return utf8_text(value, "the memory")

    @staticmethod
    def metadata(value: dict[str, Any] | None) -> str:
        """`value` as the jsonb Postgres takes: an object (a list or a text would never match a filter), with
        finite numbers only (Postgres has no NaN or Infinity in JSON)."""
        if value is not None and not isinstance(value, dict):
            raise MemoryStoreError(f"metadata must be a JSON object ({{...}}), not {type(value).__name__}")
        try:
            encoded = json.dumps(value or {}, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as e:  # ValueError: NaN or Infinity, or an object inside itself
            not_finite = "Out of range float" in str(e)
            raise MemoryStoreError(
                "metadata must hold finite numbers only (no NaN or Infinity)"
                if not_finite
                else f"metadata must be JSON: {e}"
            ) from e
        utf8_text(encoded, "the metadata's JSON")
        if len(encoded.encode()) > 65536 or "\\u0000" in encoded:
            raise MemoryStoreError("metadata must be JSON of at most 64 kB, without NUL characters")
        return encoded

    # -- writing -----------------------------------------------------------------------------------
    async def store(
        self,
        content: str,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        source: str | None = None,
    ) -> tuple[Memory, int | None]:
        """The stored memory, and the id of the memory it duplicates (then nothing new is stored)."""
        content, ns, meta = self.content(content), self.namespace(namespace), self.metadata(metadata)
        digest = content_hash(content)
        async with self.connection() as c:
            existing = await c.fetchrow(
                f"SELECT {COLUMNS} FROM memories WHERE namespace = $1 AND content_hash = $2 AND {CURRENT}", ns, digest
            )
        if existing:
            return memory(existing), existing["id"]
        [vector] = await self.embedder.embed([content])
        async with self.connection() as c:
            # the memory, its words counted as deltas (migration 009): no row another writer needs is locked
            row = await c.fetchrow(
                f"SELECT {COLUMNS} FROM cortex_insert($1, $2, $3, $4::jsonb, $5, $6)",
                ns,
                content,
                digest,
                meta,
                source,
                vector,
            )
            if row is None:  # another client stored the same text a moment ago
                row = await c.fetchrow(
                    f"SELECT {COLUMNS} FROM memories WHERE namespace = $1 AND content_hash = $2 AND {CURRENT}",
                    ns,
                    digest,
                )
                if row is None:  # and forgotten since
                    raise MemoryStoreError("the same memory was stored and forgotten meanwhile; try again")
                return memory(row), row["id"]
        # then its words in its neighbours' context, taking turns with the namespace's other writers (009), as one
        # call with the stores that arrive meanwhile (`Settler`). The memory is kept already: a failure or a cancel
        # here must not say otherwise (a retry would find it a duplicate of itself); what is left undone, the
        # store's next opening heals.
        await self._settler.settle(ns, row["id"])
        return memory(row), None

    async def _settle(self, namespace: str, ids: list[int]) -> None:
        """Stored memories' words into their neighbours' context (a batch of one namespace, from `Settler`)."""
        try:
            async with self.connection() as c:
                await c.execute(SETTLE, namespace, sorted(ids))
                if any(i % FOLD_EVERY == 0 for i in ids):
                    await c.execute(FOLD)
        except (*_DOWN, DatabaseError, asyncpg.PostgresError) as e:
            said = (
                f"memory {ids[0]} is stored; its words in its neighbours'"
                if len(ids) == 1
                else f"memories {', '.join(map(str, ids))} are stored; their words in their neighbours'"
            )
            log.warning("%s context are not yet (%s): healed when the store is next opened", said, type(e).__name__)

    async def update(self, memory_id: int, content: str | None, metadata: dict[str, Any] | None) -> Memory:
        """A new text never overwrites: it supersedes the memory (the old version is kept as history, and
        the memory returned is the new one, with a new id). Metadata alone, or the same text with new
        metadata, is changed in place. Asked again once done, it returns the version it made (a retry)."""
        current = await self.get(memory_id)
        if content is not None and content_hash(self.content(content)) != content_hash(current.content):
            if not current.current:  # a retry of an update already made: the version that says it
                head = (await self.history(memory_id))[-1]
                if head.current and content_hash(head.content) == content_hash(self.content(content)):
                    return head if metadata is None else await self.update(head.id, None, metadata)
            return await self.supersede(memory_id, content, metadata)
        meta = None if metadata is None else self.metadata(metadata)  # None: kept as it is, in the database
        async with self.connection() as c, c.transaction():
            row = await c.fetchrow(
                "UPDATE memories SET metadata = COALESCE($2::jsonb, metadata), updated_at = now() "
                f"WHERE id = $1 AND deleted_at IS NULL RETURNING {COLUMNS}",
                memory_id,
                meta,
            )
        if row is None:
            raise MemoryStoreError(f"no memory {memory_id}")
        return memory(row)

    async def forget(self, memory_id: int) -> Forgetting:
        """Forget a memory: it is no longer found or read anywhere. A version of a changed fact leaves its chain
        closed over the gap (the versions before and after it are linked to each other); the current version gives
        its place back to the one it superseded, current again (unless another current memory of its namespace
        says exactly what that one says: then it stays history, with no successor); what it did is returned, for
        the CLI, the MCP tool and the web to say. Its image goes with it: the row at once, the files once no other
        version of the fact names them (a superseded version shares them). Files left by a process killed between
        the two are removed by `ImageStore.sweep`, as are those of a row deleted outright.

        The rows of the memory and of its neighbours are locked first, in the order of their ids: forgets of
        neighbouring versions at the same moment take turns (each locking its own row first, they deadlocked)."""
        async with self.connection() as c:
            for _ in range(FORGET_TRIES):
                try:
                    async with c.transaction():
                        done = await self._forget(c, memory_id)
                except _Moved:
                    continue
                except asyncpg.DeadlockDetectedError:  # (with a writer that locks otherwise): rolled back whole
                    raise MemoryStoreError(
                        f"memory {memory_id} was being changed by another client at the same moment; nothing was "
                        "changed: try again"
                    ) from None
                break
            else:
                raise MemoryStoreError(
                    f"the versions either side of memory {memory_id} kept changing while it was forgotten; nothing "
                    "was changed: try again"
                )
            if done is None:
                raise MemoryStoreError(f"no memory {memory_id} (it may already be forgotten)")
            forgetting, files = done
            if files is not None:
                names = [files["original"], files["thumbnail"]]
                shared = await c.fetchval(
                    "SELECT array_agg(n) FROM memory_images, unnest(array[original, thumbnail]) n "
                    "WHERE original = ANY($1::text[]) OR thumbnail = ANY($1::text[])",
                    names,
                )
                await self._remove_files([n for n in names if n not in (shared or [])])
        return forgetting

    @staticmethod
    async def _forget(c: PoolConnectionProxy, memory_id: int) -> tuple[Forgetting, asyncpg.Record | None] | None:
        """`forget`'s transaction: what it did and the image files the memory named (None: no such memory)."""
        locked = {r["id"]: r for r in await c.fetch(LOCK_NEIGHBOURS, memory_id)}
        mine = locked.get(memory_id)
        if mine is None or mine["deleted_at"] is not None:
            return None
        if not {mine["supersedes"], mine["superseded_by"]} - {None} <= locked.keys():
            raise _Moved  # linked meanwhile to a version not locked: lock them all again, in order
        row = await c.fetchrow(f"UPDATE memories SET deleted_at = now() WHERE id = $1 RETURNING {COLUMNS}", memory_id)
        assert row is not None  # locked above, not forgotten
        await c.execute(REFRESH, row["namespace"], [memory_id])  # its words leave its neighbours' context too
        again, kept = await _close_chain(c, row)
        files = await c.fetchrow(
            "DELETE FROM memory_images WHERE memory_id = $1 RETURNING original, thumbnail", memory_id
        )
        return Forgetting(memory(row), current_again=again, kept_as_history=kept), files

    async def _remove_files(self, names: Sequence[str]) -> None:
        folder = self.images_dir
        if folder is None or not names:
            return

        def remove() -> None:
            for name in names:
                (folder / Path(name).name).unlink(missing_ok=True)  # names come from the database, never a caller

        await anyio.to_thread.run_sync(remove)

    async def supersede(self, memory_id: int, content: str, metadata: dict[str, Any] | None = None) -> Memory:
        """A fact that changed: a new memory with `content` (and the old one's metadata unless given) takes
        the place of `memory_id`, which is kept, no longer current (`valid_to`), linked both ways."""
        content = self.content(content)
        old = await self.get(memory_id)
        if not old.current:
            raise MemoryStoreError(
                f"memory {memory_id} was already superseded by memory {old.superseded_by}: supersede that one"
            )
        if content_hash(content) == content_hash(old.content):
            raise MemoryStoreError(f"memory {memory_id} already says exactly that: nothing changed")
        meta = None if metadata is None else self.metadata(metadata)  # None: the old one's, copied in the database
        async with self.connection() as c:
            image = await c.fetchrow("SELECT sha256, description FROM memory_images WHERE memory_id = $1", memory_id)
        digest = content_hash(content)
        if image is not None:  # the new version keeps the image: found by its description's words, as the old was
            digest = image_hash(content, image["sha256"])
            content = described(content, image["description"], self.max_chars)
        [vector] = await self.embedder.embed([content])
        async with self.connection() as c, c.transaction():
            # the old one is locked and checked again: two clients superseding it at once make one chain
            ended = await c.fetchval(
                f"UPDATE memories SET valid_to = now() WHERE id = $1 AND {CURRENT} RETURNING id", memory_id
            )
            if ended is None:
                raise MemoryStoreError(f"memory {memory_id} was superseded or forgotten a moment ago; nothing changed")
            try:
                row = await c.fetchrow(
                    "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding, supersedes) "
                    "VALUES ($1, $2, $3, COALESCE($4::jsonb, (SELECT m.metadata FROM memories m WHERE m.id = $7)), "
                    f"$5, $6, $7) RETURNING {COLUMNS}",
                    old.namespace,
                    content,
                    digest,
                    meta,
                    old.source,
                    vector,
                    memory_id,
                )
            except asyncpg.UniqueViolationError:
                raise MemoryStoreError(
                    "another current memory in this namespace already has that exact text: "
                    "forget or supersede that one instead"
                ) from None
            assert row is not None  # an INSERT … RETURNING with no ON CONFLICT returns its row
            await c.execute("UPDATE memories SET superseded_by = $2 WHERE id = $1", memory_id, row["id"])
            # both versions name the same files (no copy: an image may be 20 MB); forget removes them with the last
            await c.execute(
                f"INSERT INTO memory_images (memory_id, {IMAGE_COLUMNS}) SELECT $2, {IMAGE_COLUMNS} "
                "FROM memory_images WHERE memory_id = $1",
                memory_id,
                row["id"],
            )
            await c.execute(REFRESH, old.namespace, [row["id"]])
        return memory(row)

    async def history(self, memory_id: int) -> list[Memory]:
        """Every version of the fact `memory_id` belongs to, oldest first (forgotten ones left out)."""
        async with self.connection() as c:
            rows = await c.fetch(
                "WITH RECURSIVE back(id) AS (SELECT $1::bigint UNION SELECT m.supersedes FROM memories m JOIN back "
                "ON m.id = back.id WHERE m.supersedes IS NOT NULL), "
                "fwd(id) AS (SELECT $1::bigint UNION SELECT m.superseded_by FROM memories m JOIN fwd "
                "ON m.id = fwd.id WHERE m.superseded_by IS NOT NULL) "
                f"SELECT {COLUMNS} FROM memories WHERE id IN (SELECT id FROM back UNION SELECT id FROM fwd) "
                "AND deleted_at IS NULL ORDER BY created_at, id",
                memory_id,
            )
        return [memory(r) for r in rows]

    # -- reading -----------------------------------------------------------------------------------
    async def get(self, memory_id: int) -> Memory:
        async with self.connection() as c:
            row = await c.fetchrow(f"SELECT {COLUMNS} FROM memories WHERE id = $1 AND deleted_at IS NULL", memory_id)
        if row is None:
            raise MemoryStoreError(f"no memory {memory_id}")
        return memory(row)

    async def recent(
        self, limit: int, namespace: str | None, *, metadata: dict[str, Any] | None = None
    ) -> list[Memory]:
        """The newest current memories; with `metadata`, only those whose metadata holds all of it."""
        async with self.connection() as c:
            rows = await c.fetch(
                f"SELECT {COLUMNS} FROM memories WHERE namespace = $1 AND {CURRENT} "
                "AND metadata @> $3::jsonb ORDER BY created_at DESC, id DESC LIMIT $2",
                self.namespace(namespace),
                limit,
                self.metadata(metadata or {}),
            )
        return [memory(r) for r in rows]

    async def namespaces(self) -> dict[str, int]:
        """Each namespace that holds memories, and how many."""
        async with self.connection() as c:
            rows = await c.fetch("SELECT namespace, memories FROM memory_namespaces WHERE memories > 0 ORDER BY 1")
        return {r["namespace"]: r["memories"] for r in rows}

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        mode: Mode = "hybrid",
        min_score: float = 0.0,
        context: bool = True,
        include_history: bool = False,
    ) -> list[Hit]:
        """The best `limit` memories for `query`, each scored in [0, 1] whatever else was found
        (`_search` says how); those under `min_score` are left out. Nothing found is an empty list.
        `context=False`: a memory's own words only, not its neighbours' (standalone notes).
        Current memories only, unless `include_history` (then superseded ones too, marked by `valid_to`)."""
        [hits] = await self.search_many(
            [query],
            limit=limit,
            since=since,
            until=until,
            namespace=namespace,
            mode=mode,
            min_score=min_score,
            context=context,
            include_history=include_history,
        )
        return hits

    async def search_many(
        self,
        queries: Sequence[str],
        *,
        limit: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        mode: Mode = "hybrid",
        min_score: float = 0.0,
        context: bool = True,
        include_history: bool = False,
    ) -> list[list[Hit]]:
        """`search` for each query, in order, embedded in one batch and looked up side by side."""
        return await _search.search(
            self,
            queries,
            limit=limit,
            since=since,
            until=until,
            namespace=namespace,
            mode=mode,
            min_score=min_score,
            context=context,
            include_history=include_history,
        )
