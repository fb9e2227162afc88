"""Images in messages: what a client may send (PNG, JPEG, GIF, WebP, each checked by its first bytes, not by
what it says it is), how large, and the content blocks the model gets for them."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from .exceptions import InputError

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # the Messages API's own limit for one image
MAX_IMAGES = 10  # in one message
KINDS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}


def sniffed(data: bytes) -> str | None:
    """The image type the bytes are, by their signature."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def checked(media_type: Any, data: bytes) -> str:
    """The image's type, when `data` is one of the kinds allowed, of that type, and not too large."""
    if not isinstance(media_type, str) or media_type.split(";")[0].strip().lower() not in KINDS:
        raise InputError(f"images are {', '.join(KINDS.values())} ({', '.join(KINDS)}); not {str(media_type)[:60]!r}")
    media_type = media_type.split(";")[0].strip().lower()
    if not data:
        raise InputError("the image is empty")
    if len(data) > MAX_IMAGE_BYTES:
        raise InputError(f"the image is {len(data)} bytes; at most {MAX_IMAGE_BYTES} ({MAX_IMAGE_BYTES // 2**20} MB)")
    actual = sniffed(data)
    if actual != media_type:
        raise InputError(
            f"the file says it is {KINDS[media_type]} but it is "
            f"{KINDS[actual] if actual else 'no image this service takes'}"
        )
    return media_type


def inline(item: Any) -> tuple[str, bytes]:
    """An image sent in a message as {"media_type": …, "data": base64}."""
    if not isinstance(item, Mapping) or not isinstance(item.get("data"), str):
        raise InputError('an image is {"media_type": "image/png", "data": BASE64}')
    if len(item["data"]) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise InputError(f"the image is larger than {MAX_IMAGE_BYTES} bytes")
    try:
        data = base64.b64decode(item["data"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise InputError(f"the image's data is not base64: {e}") from e
    return checked(item.get("media_type"), data), data


def block(media_type: str, data: bytes) -> dict[str, Any]:
    """The content block the model gets."""
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode("ascii")},
    }
