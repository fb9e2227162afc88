"""What every backend offers the server: check a request, generate one image, report progress."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from .exceptions import BackendError, BadRequestError

Answer = TypeVar("Answer", bound=BaseModel)
Progress = Callable[[float, str], Awaitable[None]]  # (fraction done 0..1, what is happening)


@dataclass(frozen=True)
class ImageRequest:
    prompt: str
    negative_prompt: str | None
    width: int
    height: int
    steps: int | None
    seed: int | None
    model: str | None


@dataclass(frozen=True)
class Generated:
    data: bytes
    seed: int | None
    model: str | None


class Backend(Protocol):
    name: str

    def check(self, request: ImageRequest) -> None:
        """Raise BadRequestError when this backend cannot make the image asked for."""

    async def generate(self, request: ImageRequest, progress: Progress) -> Generated: ...


def check_multiple_of(request: ImageRequest, step: int, lo: int = 64, hi: int = 2048) -> None:
    for name, value in (("width", request.width), ("height", request.height)):
        if not lo <= value <= hi or value % step:
            raise BadRequestError(f"{name} {value} is not accepted: use a multiple of {step} from {lo} to {hi}")


def understood(model: type[Answer], data: Any, who: str, part: str = "") -> Answer:
    """`data` read as `model`, the shape of (a `part` of) a backend's answer; BackendError saying what did
    not fit if it is not that."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in (part, *first["loc"]) if p != "") or "the whole answer"
        raise BackendError(
            f"{who}'s answer was not understood: {where}: {first['msg']} (got {str(first['input'])[:80]!r})"
        ) from None


def seed_or_none(value: object) -> int | None:
    """A seed a backend reports, when it is an integer; anything else is no seed."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def decode_b64(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError, TypeError) as e:
        raise BackendError(f"{where} returned an image that is not valid base64") from e


@contextmanager
def http_errors(url: str, timeout: float) -> Iterator[None]:
    """httpx's errors as messages a person can act on."""
    try:
        yield
    except httpx.ConnectError as e:
        raise BackendError(f"the image backend at {url} is not reachable (is it running?): {e}") from e
    except httpx.TimeoutException as e:
        raise BackendError(f"the image backend at {url} did not answer within {timeout:g} s") from e
    except httpx.HTTPStatusError as e:
        body = e.response.text[:300].strip()
        raise BackendError(f"the image backend answered HTTP {e.response.status_code}: {body}") from e
    except httpx.HTTPError as e:
        raise BackendError(f"the image backend at {url} failed: {e}") from e
    except ValueError as e:  # a body that is not the JSON the protocol promises
        raise BackendError(f"the image backend at {url} answered something unexpected: {e}") from e
