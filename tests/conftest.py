"""Fixtures for every test: a private data directory, and the story files shipped beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from frobozz.games import GamesSettings

ROOT = Path(__file__).resolve().parents[1]


def _games_dir() -> Path:
    configured = os.environ.get("FROBOZZ_GAMES_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "games"
    if not (path / "zork1.z5").is_file():
        raise RuntimeError(f"the tests need Zork I's story files in {path} (set FROBOZZ_GAMES_DIR)")
    return path.resolve()


GAMES_DIR = _games_dir()
ZORK1 = GAMES_DIR / "zork1.z5"
ZORK1_R119 = GAMES_DIR / "zork1-r119.z3"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run under anyio's plugin (fixtures and test share one task) on asyncio."""
    return "asyncio"


@pytest.fixture(autouse=True)
def frobozz_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data directory, so nothing touches the user's games or saves."""
    data_dir = tmp_path / "data"
    monkeypatch.setenv("FROBOZZ_DATA_DIR", str(data_dir))
    monkeypatch.setenv("FROBOZZ_GAMES_DIR", str(GAMES_DIR))
    return data_dir


@pytest.fixture
def settings(frobozz_env: Path) -> GamesSettings:
    return GamesSettings()
