"""An image given with a memory, checked before anything is kept: read from an allowed folder or decoded
from base64, within the size limit, truly the type it claims, not a decompression bomb; then its thumbnail
(a JPEG whose long edge is at most 768 px). Pure and blocking: the store runs it in a worker thread."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import mimetypes
import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from .exceptions import ImageError

THUMBNAIL_EDGE = 768
# the types kept, as Pillow names them (a camera's MPO is a JPEG with more pictures after the first)
MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_FORMATS = ("PNG", "JPEG", "GIF", "WEBP")  # MPO is opened as JPEG


@dataclass(frozen=True)
class ImageInput:
    """What a caller gave: a `path` the server may read, or base64 `data` with its `media_type`."""

    path: str | None = None
    data: str | None = None
    media_type: str | None = None


@dataclass(frozen=True)
class Picture:
    """A checked image: its bytes as given, what it is, and its thumbnail."""

    raw: bytes
    media_type: str
    width: int
    height: int
    thumbnail: bytes
    thumbnail_width: int
    thumbnail_height: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB"


def read(given: ImageInput, *, folders: list[Path], max_bytes: int) -> tuple[bytes, str | None]:
    """The image's bytes and the type it claims (a path's extension, or the media type given)."""
    if (given.path is None) == (given.data is None):
        raise ImageError("give the image either as a path or as base64 data (with its media_type), not both")
    if given.data is not None:
        if given.media_type not in EXTENSIONS:
            raise ImageError(f"base64 data needs its media_type, one of {', '.join(EXTENSIONS)}")
        if len(given.data) > (max_bytes + 2) // 3 * 4 + 4:
            raise ImageError(f"the image is over the limit of {_mb(max_bytes)} (about {_mb(len(given.data) * 3 // 4)})")
        try:
            return base64.b64decode("".join(given.data.split()), validate=True), given.media_type
        except (binascii.Error, ValueError) as e:
            raise ImageError(f"the image data is not valid base64: {e}") from None
    return _read_file(given.path or "", folders, max_bytes), mimetypes.guess_type(given.path or "")[0]


def _read_file(path: str, folders: list[Path], max_bytes: int) -> bytes:
    if not path or "\0" in path:
        raise ImageError("the image path is empty or holds a NUL character")
    if not folders:
        raise ImageError(
            "this server reads no image files (no folder is allowed: FROBOZZ_CORTEX_IMAGE_FOLDERS); "
            "send the image as base64 data with its media_type instead"
        )
    try:
        target = Path(path).expanduser().resolve(strict=True)  # symlinks followed: where it really is counts
    except (OSError, RuntimeError):
        raise ImageError(f"no such image file: {path[:300]!r}") from None
    allowed = [f.expanduser().resolve() for f in folders]
    if not any(target.is_relative_to(f) for f in allowed):
        raise ImageError(
            f"{path[:300]!r} is outside the folders this server may read images from "
            f"({', '.join(str(f) for f in allowed)})"
        )
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise ImageError(f"cannot read {path[:300]!r}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ImageError(f"{path[:300]!r} is not a regular file")
        if info.st_size > max_bytes:
            raise ImageError(f"{path[:300]!r} is {_mb(info.st_size)}: the limit is {_mb(max_bytes)}")
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:  # it grew while being read
        raise ImageError(f"{path[:300]!r} is over the limit of {_mb(max_bytes)}")
    return raw


def check(raw: bytes, claimed: str | None, *, max_pixels: int) -> Picture:
    """The image, decoded once to be sure of it, and its thumbnail; ImageError says what is wrong."""
    if not raw:
        raise ImageError("the image is empty")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(raw), formats=_FORMATS)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageError(
                f"the image claims more pixels than the {max_pixels:,} allowed (a decompression "
                "bomb?); nothing was kept"
            ) from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
            what = f"claims to be {claimed} but " if claimed else ""
            raise ImageError(f"the image {what}is not a PNG, JPEG, GIF or WebP image Pillow can read") from None
        media_type = MEDIA_TYPES.get(image.format or "")
        if media_type is None:
            raise ImageError(f"{image.format} images are not kept: PNG, JPEG, GIF or WebP only")
        if claimed is not None and claimed != media_type:
            raise ImageError(f"the image claims to be {claimed} but is {media_type}: nothing was kept")
        width, height = image.size
        if width * height > max_pixels:
            raise ImageError(
                f"the image is {width}x{height} = {width * height:,} pixels; at most {max_pixels:,} "
                "are decoded (a decompression bomb?): nothing was kept"
            )
        try:
            thumbnail = _thumbnail(image)
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
            raise ImageError(f"the {media_type} image is damaged and cannot be decoded ({type(e).__name__})") from None
    data = io.BytesIO()
    thumbnail.save(data, "JPEG", quality=85, optimize=True)
    return Picture(
        raw=raw,
        media_type=media_type,
        width=width,
        height=height,
        thumbnail=data.getvalue(),
        thumbnail_width=thumbnail.width,
        thumbnail_height=thumbnail.height,
    )


def _thumbnail(image: Image.Image) -> Image.Image:
    """RGB, upright (EXIF orientation), transparency on white, long edge at most THUMBNAIL_EDGE."""
    if image.format in ("JPEG", "MPO"):
        image.draft("RGB", (THUMBNAIL_EDGE, THUMBNAIL_EDGE))  # decode at a smaller scale when it can
    image.load()
    image = ImageOps.exif_transpose(image) or image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, "white")
        background.paste(rgba, mask=rgba.getchannel("A"))
        image = background
    else:
        image = image.convert("RGB")
    image.thumbnail((THUMBNAIL_EDGE, THUMBNAIL_EDGE), Image.Resampling.LANCZOS)
    return image
