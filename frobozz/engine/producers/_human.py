"""A person typing: each line read from a text stream (stdin by default) becomes a user message."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

import anyio

if TYPE_CHECKING:
    from .._session import Session


class HumanInput:
    """Producer: each line a person types (stdin, or the stream given) as a user message."""

    name = "human"

    def __init__(self, stream: TextIO | None = None, *, max_chars: int = 100_000) -> None:
        self.stream = stream
        self.max_chars = max_chars

    async def run(self, session: Session) -> None:
        lines = anyio.wrap_file(self.stream or sys.stdin)
        async for line in lines:
            text = line.rstrip("\r\n")
            if text.strip():
                await session.send(text[: self.max_chars])
