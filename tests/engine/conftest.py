"""Engine tests run the real claude CLI (installed by the README's set-up) against a scripted
Messages API on 127.0.0.1, each test in its own HOME so sessions never mix."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from frobozz.engine import EngineOptions, Event
from frobozz.engine.testing import ScriptedModel

E = TypeVar("E", bound=Event)


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("CLAUDE_CONFIG_DIR", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDECODE"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def make_options(claude_home: Path) -> Callable[..., EngineOptions]:
    def make(scripted: ScriptedModel, *, env: dict[str, str] | None = None, **options: Any) -> EngineOptions:
        full_env = {**scripted.env(), "HOME": str(claude_home), "CLAUDE_CODE_MAX_RETRIES": "0", **(env or {})}
        return EngineOptions(env=full_env, cwd=claude_home, **options)
    return make


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
