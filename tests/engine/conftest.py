"""Helpers for tests that run the real claude CLI (installed by the README's set-up) against a
scripted Messages API on 127.0.0.1 (the fixtures are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import anyio

from frobozz.engine import Event
from tests.waiting import eventually

E = TypeVar("E", bound=Event)


async def until(events: AsyncIterator[Event], kind: type[E], *, count: int = 1, timeout: float = 60) -> list[Event]:  # noqa: ASYNC109 - every wait of the tests has a limit
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


async def wait_for_file(path: Path, timeout: float = 10) -> None:  # noqa: ASYNC109 - every wait has a limit
    """claude writes some files a moment after the fact; poll briefly, never a fixed sleep."""
    with anyio.fail_after(timeout):
        await eventually(path.exists, interval=0.02)


async def send_and_kill_mid_turn(session, text: str, calls: list, answering: int) -> list[Event]:
    """Send `text` and kill claude while the model answers it (once `calls` has `answering` entries),
    after claude has written its transcript (so it can be resumed); the events up to the turn's Result."""
    from frobozz.engine import Result, SystemInit, transcript_path

    transcript = transcript_path(session.session_id, session.engine.cwd, session.engine.env)
    await session.send(text)
    await until(session.events(), SystemInit)
    await wait_for_file(transcript)
    with anyio.fail_after(30):
        await eventually(lambda: len(calls) >= answering, interval=0.01)
    session.engine.kill()
    return await until(session.events(), Result)
