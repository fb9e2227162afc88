"""Memories with an image: the image and its thumbnail kept as files in the images folder, named by one row of
`memory_images` (migration 007) written in the same transaction as the memory. Nothing is half-stored: the
files are written first and removed again when the transaction does not commit, and a failed check or
description leaves nothing behind."""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import asyncpg
from asyncpg.pool import PoolConnectionProxy

from . import _images
from ._images import ImageInput, Picture
from ._records import COLUMNS, CURRENT, Memory, described, image_hash, memory
from ._store import IMAGE_COLUMNS, REFRESH, MemoryStore
from ._vision import Describer
from .exceptions import DatabaseError, ImageError, MemoryStoreError
from .settings import MemorySettings

log = logging.getLogger("frobozz.cortex")
_IMAGE = f"{IMAGE_COLUMNS}, created_at"


async def insert_image_row(
    c: PoolConnectionProxy,
    memory_id: int,
    picture: Picture,
    names: tuple[str, str],
    description: str | None,
    described_by: str | None,
) -> asyncpg.Record | None:
    """The `memory_images` row that names a memory's image files (`names`: original, thumbnail), in the
    caller's transaction; the row as kept."""
    return await c.fetchrow(
        f"INSERT INTO memory_images (memory_id, {IMAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
        f"$11, $12) RETURNING memory_id, {_IMAGE}",
        memory_id,
        picture.media_type,
        len(picture.raw),
        picture.width,
        picture.height,
        picture.sha256,
        names[0],
        names[1],
        picture.thumbnail_width,
        picture.thumbnail_height,
        description,
        described_by,
    )


@dataclass(frozen=True)
class MemoryImage:
    """The image kept with memory `memory_id`; `original` and `thumbnail` are file names in the images folder."""

    memory_id: int
    media_type: str
    bytes: int
    width: int
    height: int
    sha256: str
    original: str
    thumbnail: str
    thumbnail_width: int
    thumbnail_height: int
    description: str | None
    described_by: str | None
    created_at: datetime


def _image(row: asyncpg.Record) -> MemoryImage:
    return MemoryImage(memory_id=row["memory_id"], **{k: row[k] for k in _IMAGE.split(", ")})


class ImageStore:
    """Store a memory with an image, and read a memory's image back (`MemoryService.images()`)."""

    def __init__(self, store: MemoryStore, settings: MemorySettings, *, folders: Sequence[Path] | None = None) -> None:
        """`folders`: where paths may be read (the settings' FROBOZZ_CORTEX_IMAGE_FOLDERS unless given)."""
        self.store = store
        self.folder = settings.images_dir
        self.folders = list(settings.cortex_image_folders if folders is None else folders)
        self.max_bytes = settings.cortex_image_max_bytes
        self.max_pixels = settings.cortex_image_max_pixels
        self.describer = Describer.configured(settings)

    async def check(self, given: ImageInput) -> Picture:
        """The image read and checked (its limits, its type, its pixels), with its thumbnail made."""
        raw, claimed = await anyio.to_thread.run_sync(
            lambda: _images.read(given, folders=self.folders, max_bytes=self.max_bytes)
        )
        return await anyio.to_thread.run_sync(lambda: _images.check(raw, claimed, max_pixels=self.max_pixels))

    async def remember(
        self,
        content: str,
        given: ImageInput,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        source: str | None = None,
    ) -> tuple[Memory, int | None, MemoryImage]:
        """Store `content` with the image: the memory (its text, and the vision model's description of the image
        when one is configured, so words find it), the id of the memory it duplicates (the same text with the
        same image: nothing new is kept), and the image's record."""
        store = self.store
        content, ns, meta = store.content(content), store.namespace(namespace), store.metadata(metadata)
        picture = await self.check(given)
        digest = image_hash(content, picture.sha256)  # the same words with another image differ
        existing = await self._existing(ns, digest)
        if existing is not None:
            return existing[0], existing[0].id, existing[1]
        description = await self._describe(picture, content)
        text = described(content, description, store.max_chars)
        [vector] = await store.embedder.embed([text])
        names = await anyio.to_thread.run_sync(self.write, picture)
        try:
            async with store.connection() as c, c.transaction():
                row = await c.fetchrow(
                    "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding) "
                    "VALUES ($1, $2, $3, $4::jsonb, $5, $6) ON CONFLICT (namespace, content_hash) "
                    f"WHERE {CURRENT} DO NOTHING RETURNING {COLUMNS}",
                    ns,
                    text,
                    digest,
                    meta,
                    source,
                    vector,
                )
                if row is not None:
                    kept = await insert_image_row(
                        c,
                        row["id"],
                        picture,
                        names,
                        description,
                        self.describer.model if description and self.describer else None,
                    )
                    await c.execute(REFRESH, ns, [row["id"]])
        except BaseException as e:
            await anyio.to_thread.run_sync(self.remove, names)
            if isinstance(e, asyncpg.PostgresError):
                raise DatabaseError(
                    f"the memory and its image were not stored ({type(e).__name__}: {e}); nothing was kept"
                ) from e
            raise
        if row is None:  # another client stored the same text and image a moment ago
            await anyio.to_thread.run_sync(self.remove, names)
            existing = await self._existing(ns, digest)
            if existing is None:
                raise MemoryStoreError("the same memory was stored and forgotten meanwhile; try again")
            return existing[0], existing[0].id, existing[1]
        assert kept is not None  # its INSERT … RETURNING ran with the memory's
        return memory(row), None, _image(kept)

    async def _existing(self, namespace: str, digest: str) -> tuple[Memory, MemoryImage] | None:
        async with self.store.connection() as c:
            row = await c.fetchrow(
                f"SELECT {COLUMNS} FROM memories WHERE namespace = $1 AND content_hash = $2 AND {CURRENT}",
                namespace,
                digest,
            )
            image = row and await c.fetchrow(
                f"SELECT memory_id, {_IMAGE} FROM memory_images WHERE memory_id = $1", row["id"]
            )
        return (memory(row), _image(image)) if row and image else None

    async def _describe(self, picture: Picture, note: str) -> str | None:
        if self.describer is None:
            return None
        try:
            return await self.describer.describe(picture.thumbnail, note)
        except ImageError as e:  # the memory is still worth keeping, found by its own words
            log.warning("cortex: the image was kept without a description: %s", e)
            return None

    # -- the files ---------------------------------------------------------------------------------
    def write(self, picture: Picture) -> tuple[str, str]:
        """Both files, each written under a temporary name and renamed once complete."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ImageError(f"the images folder {self.folder} cannot be made ({e.strerror}); nothing was kept") from e
        token = secrets.token_hex(16)
        names = (f"{token}.{_images.EXTENSIONS[picture.media_type]}", f"{token}.thumb.jpg")
        try:
            for name, data in zip(names, (picture.raw, picture.thumbnail), strict=True):
                partial = self.folder / f".{name}.part"
                with open(partial, "xb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(partial, self.folder / name)
        except OSError as e:
            self.remove(names)
            raise ImageError(f"the image could not be written to {self.folder} ({e.strerror}); nothing was kept") from e
        return names

    def remove(self, names: Sequence[str]) -> None:
        for name in names:
            for path in (self.folder / name, self.folder / f".{name}.part"):
                path.unlink(missing_ok=True)

    async def sweep(self, *, older_than: float = 3600.0) -> list[str]:
        """Remove the files no row names, left by a process killed between writing them and committing (only
        those older than `older_than` seconds: a store under way has not committed yet). The names removed."""

        def stray(names: set[str]) -> list[str]:
            gone: list[str] = []
            try:
                entries = list(os.scandir(self.folder))
            except OSError:  # no folder yet, or not a folder: writing into it will say so
                return gone
            for entry in entries:
                name = entry.name.removeprefix(".").removesuffix(".part")
                if name in names or not entry.is_file(follow_symlinks=False):
                    continue
                try:
                    if time.time() - entry.stat(follow_symlinks=False).st_mtime > older_than:
                        Path(entry.path).unlink(missing_ok=True)
                        gone.append(entry.name)
                except OSError:
                    continue
            return gone

        async with self.store.connection() as c:
            rows = await c.fetch("SELECT original, thumbnail FROM memory_images")
        removed = await anyio.to_thread.run_sync(stray, {n for r in rows for n in (r["original"], r["thumbnail"])})
        if removed:
            log.warning("cortex: removed %d image files no memory names (a store killed midway)", len(removed))
        return removed

    # -- reading -----------------------------------------------------------------------------------
    async def image(self, memory_id: int) -> MemoryImage | None:
        """The image kept with a memory, or None (a forgotten memory's too: it is never served)."""
        columns = ", ".join(f"i.{c}" for c in _IMAGE.split(", "))
        async with self.store.connection() as c:
            row = await c.fetchrow(
                f"SELECT i.memory_id, {columns} FROM memory_images i JOIN memories m ON m.id = "
                "i.memory_id WHERE i.memory_id = $1 AND m.deleted_at IS NULL",
                memory_id,
            )
        return _image(row) if row else None

    async def with_images(self, memory_ids: Sequence[int]) -> set[int]:
        """Which of these memories have an image (for search results)."""
        if not memory_ids:
            return set()
        async with self.store.connection() as c:
            rows = await c.fetch(
                "SELECT memory_id FROM memory_images WHERE memory_id = ANY($1::bigint[])", list(memory_ids)
            )
        return {r["memory_id"] for r in rows}

    def path(self, name: str) -> Path:
        """Where a kept file is (names come from the database, never from a caller)."""
        return self.folder / Path(name).name

    async def read(self, image: MemoryImage, *, thumbnail: bool = True) -> bytes:
        """The thumbnail's (or the original's) bytes."""
        path = self.path(image.thumbnail if thumbnail else image.original)
        try:
            return await anyio.Path(path).read_bytes()
        except OSError as e:
            raise ImageError(
                f"the image of memory {image.memory_id} is missing from {self.folder} ({e.strerror})"
            ) from e
