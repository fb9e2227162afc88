"""Helpers for tests that run the real claude CLI (installed by the README's set-up) against a
scripted Messages API on 127.0.0.1 (the fixtures are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import anyio

from frobozz.engine import Event

E = TypeVar("E", bound=Event)


async def until(events: AsyncIterator[Event], kind: type[E], *, count: int = 1, timeout: float = 60) -> list[Event]:
    """Events up to and including the `count`-th of type `kind` (fails if the stream ends first)."""
    seen: list[Event] = []
    found = 0
    with anyio.fail_after(timeout):
        async for event in events:
            seen.append(event)
            if isinstance(event, kind):
                found += 1
                if found == count:
                    return seen
    raise AssertionError(f"the stream ended before {count} {kind.__name__}: {[type(e).__name__ for e in seen]}")


def of(events: list[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


async def wait_for_file(path: Path, timeout: float = 10) -> None:
    """claude writes some files a moment after the fact; poll briefly, never a fixed sleep."""
    with anyio.fail_after(timeout):
        while not path.exists():
            await anyio.sleep(0.02)


async def until_connected(session, names: set[str], *, timeout: float = 120) -> list[Event]:
    """Send "ping" turns until claude's init reports every named MCP server connected: on a busy
    machine a server can still be "pending" when the first turn starts. The last init's events."""
    from frobozz.engine import Result, SystemInit

    with anyio.fail_after(timeout):
        while True:
            await session.send("ping")
            events = await until(session.events(), Result)
            init = of(events, SystemInit)[-1]
            if {s.name for s in init.mcp_servers if s.status == "connected"} == names:
                return events
