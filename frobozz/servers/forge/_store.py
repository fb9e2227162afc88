"""Images on disk: the full-size PNG (prompt and parameters in its text chunks) and a sidecar JSON,
both written atomically, so a failed or cancelled generation leaves nothing half-written."""

from __future__ import annotations

import errno
import io
import json
import logging
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PIL import Image, PngImagePlugin, UnidentifiedImageError
from pydantic import BaseModel, ConfigDict, ValidationError

from frobozz._files import atomic_write

from .exceptions import BackendError, ForgeError

log = logging.getLogger("frobozz.forge")
_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
MAX_PIXELS = 64_000_000  # refuse decompression bombs from a misbehaving backend


PNG_MODES = {"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"}  # what Pillow writes as PNG as it is


class StoredImage(BaseModel):
    """An image's sidecar JSON, checked as it is read: a damaged one is refused, not half-trusted."""

    model_config = ConfigDict(frozen=True, strict=True)

    id: str
    path: str
    width: int
    height: int
    created: str
    prompt: str
    parameters: dict[str, Any]


def open_image(data: bytes) -> Image.Image:
    """Decode bytes that claim to be an image; BackendError if they are not one."""
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    try:
        probe = Image.open(io.BytesIO(data))
        probe.verify()
        image = Image.open(io.BytesIO(data))
        image.load()
        return pngable(image)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise BackendError(f"the backend returned something that is not an image ({len(data)} bytes)") from e


def pngable(image: Image.Image) -> Image.Image:
    """`image` in a mode PNG keeps (a CMYK JPEG, say, becomes RGB; one with alpha, RGBA)."""
    if image.mode in PNG_MODES:
        return image
    return image.convert("RGBA" if image.has_transparency_data else "RGB")


def preview_png(image: Image.Image, size: int) -> bytes:
    thumb = image.copy()
    thumb.thumbnail((size, size))
    out = io.BytesIO()
    thumb.save(out, format="PNG", optimize=True)
    return out.getvalue()


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def new_id(self) -> str:
        return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"

    def png_path(self, image_id: str) -> Path:
        return self.root / f"{image_id}.png"

    def save(self, image_id: str, image: Image.Image, prompt: str, parameters: dict[str, Any]) -> StoredImage:
        """Write the PNG and its sidecar, both or neither; ForgeError naming the folder when it cannot be."""
        image = pngable(image)
        info = PngImagePlugin.PngInfo()
        info.add_itxt("prompt", prompt)
        info.add_itxt("parameters", json.dumps(parameters))
        out = io.BytesIO()
        image.save(out, format="PNG", pnginfo=info)
        stored = StoredImage(
            id=image_id,
            path=str(self.png_path(image_id)),
            width=image.width,
            height=image.height,
            created=datetime.now(UTC).isoformat(timespec="microseconds"),
            prompt=prompt,
            parameters=parameters,
        )
        try:
            if self.root.exists() and not self.root.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "it is a file, not a folder")
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write(self.png_path(image_id), out.getvalue())
            atomic_write(self.root / f"{image_id}.json", stored.model_dump_json(indent=2).encode())
        except OSError as e:
            self.remove(image_id)
            raise ForgeError(
                f"the image cannot be saved in {self.root}: {e.strerror or e} "
                "(FROBOZZ_DATA_DIR must be a folder this server can write)"
            ) from e
        return stored

    def remove(self, image_id: str) -> None:
        """Take back what `save` wrote for `image_id` (what it did not write is no error)."""
        for path in (self.root / f"{image_id}.json", self.png_path(image_id)):
            try:
                path.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError as e:
                log.warning("could not remove %s: %s", path, e.strerror or e)

    def get(self, image_id: str) -> StoredImage:
        if not isinstance(image_id, str) or not _ID.fullmatch(image_id):
            raise ForgeError(f"{str(image_id)[:80]!r} is not an image id (they look like 20261122-013000-a1b2c3)")
        try:
            return self._read(self.root / f"{image_id}.json")
        except FileNotFoundError:
            raise ForgeError(f"no image {image_id}: list_images shows the ones there are") from None
        except (OSError, ValueError) as e:
            raise ForgeError(f"image {image_id} cannot be read: {_why(e)}") from e

    def list(self, limit: int, query: str | None) -> list[StoredImage]:
        needle = (query or "").casefold()
        found = []
        for sidecar in self.root.glob("*.json"):
            try:
                stored = self._read(sidecar)
            except (OSError, ValueError) as e:  # a damaged sidecar: skipped here, get_image reports it
                log.warning("skipping the damaged sidecar %s: %s", sidecar, _why(e))
                continue
            if needle in stored.prompt.casefold():
                found.append(stored)
        return sorted(found, key=lambda s: s.created, reverse=True)[:limit]

    def _read(self, sidecar: Path) -> StoredImage:
        """ValueError (a ValidationError) when the sidecar is not JSON or not a StoredImage's fields, or names
        another image; its picture is always `<id>.png` here, whatever path the file says (a planted sidecar's
        path was read)."""
        stored = StoredImage.model_validate_json(sidecar.read_bytes())
        if stored.id != sidecar.stem:
            raise ValueError(f"it says it is image {stored.id[:80]!r}, not {sidecar.stem!r}")
        return stored.model_copy(update={"path": str(self.png_path(stored.id))})


def _why(e: Exception) -> str:
    if isinstance(e, ValidationError):
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        return f"{where}: {first['msg']}"
    return str(e.strerror if isinstance(e, OSError) and e.strerror else e)
