"""What every Frobozz MCP server does the same way: annotations, and errors the model can act on."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

log = logging.getLogger("frobozz.servers")


def hints(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False, open_world: bool = False
) -> ToolAnnotations:
    """All four hints, always spelled out: clients must not have to guess the defaults."""
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )


@contextmanager
def tool_errors(*expected: type[Exception]) -> Iterator[None]:
    """Turn the part's own errors into ToolError, so the model reads the message and not a crash."""
    try:
        yield
    except expected as e:
        log.info("tool error: %s", e)
        raise ToolError(str(e)) from e


def closing(*closers: Callable[[], Awaitable[None]]) -> Callable[[Any], Any]:
    """A server lifespan that closes what the server opened (clients, pools, sessions) when it stops."""

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for close in closers:
                await close()

    return lifespan
