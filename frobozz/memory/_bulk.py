"""Moving many memories at once: import (batched embedding), export, and re-embedding.

A memory's image travels inside its JSONL line: `"image": {"media_type", "data" (the file as stored, in
base64), "description", "described_by"}`. One line per memory keeps an export one file that can be piped,
checked line by line and imported whole or not at all, and no path is ever read from an import (a sidecar
folder named by the lines would be). The thumbnail is not carried: import makes it again from the image with
the same code, after the same checks as `store` (size, type, pixels)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from ._database import HNSW_INDEX, INDEX_MEMORY
from ._image_store import insert_image_row
from ._images import ImageInput, Picture
from ._records import COLUMNS, CURRENT, DESCRIBED, content_hash, image_hash, memory, utf8_text
from ._store import FOLD, REFRESH, MemoryStore
from .exceptions import MemoryStoreError

if TYPE_CHECKING:
    from ._image_store import ImageStore


class BulkStore:
    """Moving many memories at once: import (batched embedding), export, and re-embedding. `images`: where
    memories' images are kept, for exporting and importing them (without it, a memory with an image is refused
    rather than moved without it)."""

    def __init__(self, store: MemoryStore, images: ImageStore | None = None) -> None:
        self.store = store
        self.images = images
        self._ids: dict[int, int] = {}  # an exported memory's id -> its id here, so chains survive (any batch)
        self._links: set[tuple[int, int]] = set()  # (exported id, the exported id it supersedes) not yet linked

    async def import_batch(self, records: list[dict[str, Any]], default_namespace: str | None) -> tuple[int, int]:
        """Store a batch of {content, metadata?, namespace?, source?, created_at?, id?, valid_to?, supersedes?,
        image?}; (stored, duplicates). A record that names the exported `id` of the one it `supersedes` is linked to
        it once both are in, whatever batch or order they come in (an export lists the older first; a file may
        not), and so is a duplicate whose link an earlier import missed (importing again repairs a chain). Images
        are checked (as `store` checks them) before anything of the batch is kept, and their files removed again
        if the batch is not."""
        s = self.store
        rows = [self.check(record, default_namespace) for record in records]
        pictures = [await self.picture(record) for record in records]
        vectors = await s.embedder.embed([r[1] for r in rows])
        added: dict[str, list[int]] = {}
        written: list[tuple[str, str] | None] = []
        kept: set[int] = set()  # which records' files a new row names
        ids: dict[int, int] = {}  # this batch's exported ids -> ids here, kept once the batch is
        links = set(self._links)
        try:
            for picture in pictures:
                written.append(
                    None if picture is None else await anyio.to_thread.run_sync(self._images().write, picture)
                )
            async with s.connection() as c, c.transaction():
                for n, (
                    (ns, content, meta, source, created, valid_to, old_id, supersedes),
                    vector,
                    picture,
                ) in enumerate(zip(rows, vectors, pictures, strict=True)):
                    digest = content_hash(content)
                    image: dict[str, Any] = records[n].get("image") or {}
                    if picture is not None:  # as `store` made it: the words without the vision model's description
                        description = image.get("description")
                        words = content.removesuffix(f"{DESCRIBED}{description}") if description else content
                        digest = image_hash(words, picture.sha256)
                    if valid_to is not None:  # a superseded version: the same one imported twice is kept once
                        row = await c.fetchrow(
                            "SELECT id, false AS new FROM memories WHERE namespace = $1 AND "
                            "content_hash = $2 AND valid_to = $3 AND deleted_at IS NULL",
                            ns,
                            digest,
                            valid_to,
                        )
                    else:
                        row = None
                    row = row or await c.fetchrow(
                        "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding, "
                        "created_at, updated_at, valid_to) VALUES ($1, $2, $3, $4::jsonb, $5, $6, "
                        f"COALESCE($7, now()), COALESCE($7, now()), $8) ON CONFLICT (namespace, content_hash) "
                        f"WHERE {CURRENT} DO NOTHING RETURNING id, true AS new",
                        ns,
                        content,
                        digest,
                        meta,
                        source,
                        vector,
                        created,
                        valid_to,
                    )
                    if row is None:  # the same current text is here already
                        row = await c.fetchrow(
                            f"SELECT id, false AS new FROM memories WHERE namespace = $1 AND "
                            f"content_hash = $2 AND {CURRENT}",
                            ns,
                            digest,
                        )
                    if row is None:  # and forgotten since
                        raise MemoryStoreError(
                            f"a memory of namespace {ns} was stored and forgotten meanwhile; "
                            "nothing was imported: try again"
                        )
                    if row["new"]:
                        added.setdefault(ns, []).append(row["id"])
                        names = written[n]
                        if picture is not None and names is not None:
                            await insert_image_row(
                                c, row["id"], picture, names, image.get("description"), image.get("described_by")
                            )
                            kept.add(n)
                    if old_id is not None:
                        ids[old_id] = row["id"]
                        if supersedes is not None:
                            links.add((old_id, supersedes))
                linked = await self._link(c, self._ids | ids, links)
                for ns, new in sorted(added.items()):
                    await c.execute(REFRESH, ns, new)
        except BaseException:
            kept.clear()  # nothing of the batch was kept: neither are its files
            raise
        finally:
            spare = [name for n, names in enumerate(written) if names and n not in kept for name in names]
            if spare:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._images().remove, spare)
        self._ids |= ids  # (the batch is kept)
        self._links = links - linked
        if added:  # the batch's word counts into the totals (migration 009), now that it is committed
            async with s.connection() as c:
                await c.execute(FOLD)
        stored = sum(map(len, added.values()))
        return stored, len(rows) - stored

    @staticmethod
    async def _link(c: Any, ids: dict[int, int], links: set[tuple[int, int]]) -> set[tuple[int, int]]:
        """The links of `links` whose two ends are here, made where a side has none yet (a link already made, or
        another chain's, is left as it is); which were resolved."""
        resolved = {(new, old) for new, old in links if new in ids and old in ids}
        for new, old in sorted(resolved):
            await c.execute(
                "UPDATE memories SET superseded_by = $2 WHERE id = $1 AND superseded_by IS NULL", ids[old], ids[new]
            )
            await c.execute(
                "UPDATE memories SET supersedes = $1 WHERE id = $2 AND supersedes IS NULL", ids[old], ids[new]
            )
        return resolved

    def _images(self) -> ImageStore:
        if self.images is None:
            raise MemoryStoreError("memories with images are moved only where their images are kept (an ImageStore)")
        return self.images

    async def picture(self, record: Any) -> Picture | None:
        """A record's image, checked as `store` checks one (size, type, pixels), with its thumbnail; None without
        one. A `MemoryStoreError` (an `ImageError`) says what is wrong with it."""
        image = record.get("image") if isinstance(record, dict) else None
        if image is None:
            return None
        return await self._images().check(ImageInput(data=image["data"], media_type=image["media_type"]))

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
        utf8_text(source, "'source'")
        _image_record(record.get("image"))
        return (
            s.namespace(record.get("namespace") or default_namespace),
            s.content(record["content"]),
            s.metadata(record.get("metadata")),
            source,
            _moment(record, "created_at"),
            _moment(record, "valid_to"),
            _id(record, "id"),
            _id(record, "supersedes"),
        )

    async def export(self, namespace: str | None) -> AsyncIterator[dict[str, Any]]:
        columns = ", ".join(f"m.{c}" for c in COLUMNS.split(", "))
        async with self.store.connection() as c, c.transaction():
            query = (
                f"SELECT {columns}, i.media_type, i.original, i.description, i.described_by FROM memories m "
                "LEFT JOIN memory_images i ON i.memory_id = m.id WHERE m.deleted_at IS NULL "
                + ("AND m.namespace = $1 " if namespace else "")
                + "ORDER BY m.id"
            )
            async for row in c.cursor(query, *([self.store.namespace(namespace)] if namespace else [])):
                m = memory(row)
                record = m.as_json()
                del record["superseded_by"]  # import links a chain again from each memory's `supersedes`
                if m.supersedes is None and m.valid_to is None:  # not in a chain
                    del record["supersedes"], record["valid_to"]
                if row["original"] is not None:
                    path = self._images().path(row["original"])
                    try:
                        data = await anyio.Path(path).read_bytes()
                    except OSError as e:
                        raise MemoryStoreError(
                            f"the image of memory {m.id} is missing from {path.parent} "
                            f"({e.strerror}); nothing more was exported"
                        ) from e
                    record["image"] = {
                        "media_type": row["media_type"],
                        "data": base64.b64encode(data).decode(),
                        "description": row["description"],
                        "described_by": row["described_by"],
                    }
                yield record

    async def count(self, namespace: str | None = None) -> int:
        async with self.store.connection() as c:
            if namespace:
                count: int = await c.fetchval(
                    "SELECT count(*) FROM memories WHERE deleted_at IS NULL AND namespace = $1",
                    self.store.namespace(namespace),
                )
            else:
                count = await c.fetchval("SELECT count(*) FROM memories WHERE deleted_at IS NULL")
        return count

    async def reembed(self, on_batch: Any = None, batch: int = 128) -> int:
        """Embed every memory again with the configured model, into a new column swapped in at the end,
        so an interrupted re-embedding leaves the old embeddings whole; how many memories it re-embedded. The rows
        that forgotten memories leave are embedded too (the column is whole) but not counted, nor passed to
        `on_batch`: they are no memories to anyone."""
        embedder = self.store.embedder
        async with self.store.connection() as c:
            await c.execute("ALTER TABLE memories DROP COLUMN IF EXISTS embedding_next")
            await c.execute(f"ALTER TABLE memories ADD COLUMN embedding_next vector({int(embedder.dim)})")
            ids = [r["id"] for r in await c.fetch("SELECT id FROM memories ORDER BY id")]
        done = 0
        for start in range(0, len(ids), batch):
            async with self.store.connection() as c:
                rows = await c.fetch(
                    "SELECT id, content, deleted_at IS NULL AS live FROM memories WHERE id = ANY($1::bigint[])",
                    ids[start : start + batch],
                )
                vectors = await embedder.embed([r["content"] for r in rows])
                await c.executemany(
                    "UPDATE memories SET embedding_next = $2 WHERE id = $1",
                    [(r["id"], v) for r, v in zip(rows, vectors, strict=True)],
                )
            live = sum(r["live"] for r in rows)
            done += live
            if on_batch:
                on_batch(live)
        async with self.store.connection() as c, c.transaction():
            await c.execute("DROP INDEX IF EXISTS memories_embedding")
            await c.execute("ALTER TABLE memories DROP COLUMN embedding")
            await c.execute("ALTER TABLE memories RENAME COLUMN embedding_next TO embedding")
            await c.execute("ALTER TABLE memories ALTER COLUMN embedding SET NOT NULL")
            await c.execute(INDEX_MEMORY)
            await c.execute(HNSW_INDEX)
            await c.execute("UPDATE cortex_meta SET value = $1 WHERE key = 'embedding_model'", embedder.model)
            await c.execute("UPDATE cortex_meta SET value = $1 WHERE key = 'embedding_dim'", str(embedder.dim))
        return done


def _moment(record: dict[str, Any], key: str) -> datetime | None:
    """The record's date and time at `key`; one more than a day to come is refused (a memory dated 2099 stood
    first in `recent` for good): a day, for clocks that differ between machines."""
    value = record.get(key)
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else _bad(key)
    except ValueError:
        return _bad(key)
    if (moment if moment.tzinfo else moment.replace(tzinfo=UTC)) > datetime.now(UTC) + timedelta(days=1):
        raise MemoryStoreError(f"'{key}' is {value[:40]}, to come: a memory's dates are past ones")
    return moment


def _id(record: dict[str, Any], key: str) -> int | None:
    value = record.get(key)
    if value is None:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else _bad(key)


def _bad(key: str) -> NoReturn:
    raise MemoryStoreError(
        f"'{key}' must be " + ("an ISO date and time" if key in ("created_at", "valid_to") else "a positive memory id")
    )


def _image_record(image: Any) -> None:
    """The shape of a record's image (its bytes are checked by `BulkStore.picture`)."""
    if image is None:
        return
    if (
        not isinstance(image, dict)
        or not isinstance(image.get("data"), str)
        or not isinstance(image.get("media_type"), str)
    ):
        raise MemoryStoreError("'image' must be a JSON object with base64 'data' and its 'media_type'")
    for key in ("description", "described_by"):
        value = image.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > 20_000 or "\0" in value:
            raise MemoryStoreError(f"the image's '{key}' must be text of at most 20,000 characters")
        utf8_text(value, f"the image's '{key}'")
