"""Images on disk: the full-size PNG (prompt and parameters in its text chunks) and a sidecar JSON,
both written atomically, so a failed or cancelled generation leaves nothing half-written."""

from __future__ import annotations

import io
import json
import re
import secrets
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from PIL import Image, PngImagePlugin, UnidentifiedImageError

from frobozz._files import atomic_write

from .exceptions import BackendError, ForgeError

_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
MAX_PIXELS = 64_000_000  # refuse decompression bombs from a misbehaving backend


@dataclass(frozen=True)
class StoredImage:
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
        return image
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise BackendError(f"the backend returned something that is not an image ({len(data)} bytes)") from e


def preview_png(image: Image.Image, size: int) -> bytes:
    thumb = image.copy()
    thumb.thumbnail((size, size))
    out = io.BytesIO()
    thumb.save(out, format="PNG", optimize=True)
    return out.getvalue()


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, image: Image.Image, prompt: str, parameters: dict[str, Any]) -> StoredImage:
        self.root.mkdir(parents=True, exist_ok=True)
        now = datetime.now(UTC)
        image_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
        info = PngImagePlugin.PngInfo()
        info.add_itxt("prompt", prompt)
        info.add_itxt("parameters", json.dumps(parameters))
        out = io.BytesIO()
        image.save(out, format="PNG", pnginfo=info)
        stored = StoredImage(
            id=image_id,
            path=str(self.root / f"{image_id}.png"),
            width=image.width,
            height=image.height,
            created=now.isoformat(timespec="microseconds"),
            prompt=prompt,
            parameters=parameters,
        )
        atomic_write(self.root / f"{image_id}.png", out.getvalue())
        atomic_write(self.root / f"{image_id}.json", json.dumps(asdict(stored), indent=2).encode())
        return stored

    def get(self, image_id: str) -> StoredImage:
        if not isinstance(image_id, str) or not _ID.fullmatch(image_id):
            raise ForgeError(f"{str(image_id)[:80]!r} is not an image id (they look like 20261122-013000-a1b2c3)")
        try:
            return StoredImage(**json.loads((self.root / f"{image_id}.json").read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ForgeError(f"no image {image_id}: list_images shows the ones there are") from None
        except (OSError, ValueError, TypeError) as e:
            raise ForgeError(f"image {image_id} cannot be read: {e}") from e

    def list(self, limit: int, query: str | None) -> list[StoredImage]:
        needle = (query or "").casefold()
        found = []
        for sidecar in self.root.glob("*.json"):
            try:
                stored = StoredImage(**json.loads(sidecar.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                continue  # a damaged sidecar: get_image reports it
            if needle in stored.prompt.casefold():
                found.append(stored)
        return sorted(found, key=lambda s: s.created, reverse=True)[:limit]
