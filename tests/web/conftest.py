"""The web view on real loopback HTTP, on the test's data folder and database, behind a token; and Debian's
chromium driven by Playwright (scripts/browser installs it), with screenshots checked for content."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from frobozz._loopback import LoopbackServer
from frobozz.runner import RunInfo, RunStore, TurnRecord
from frobozz.servers._auth import BearerToken
from frobozz.servers._http import new_token
from frobozz.web import WebSettings, create_app

TOKEN = new_token()


@pytest.fixture
def web_settings(frobozz_env, cortex_settings) -> WebSettings:
    return WebSettings(database_url=cortex_settings.database_url, web_poll_seconds=0.1)


@pytest.fixture
def site(web_settings) -> Iterator[str]:
    """The web view's URL (its token: TOKEN)."""
    with LoopbackServer(BearerToken(create_app(web_settings), TOKEN), lifespan="on") as server:
        yield server.url


@pytest.fixture
def client(site) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        yield c


def new_run(
    runs_dir: Path,
    run_id: str = "20261123-120000-abc123",
    *,
    status: str = "running",
    created: str = "2026-11-23T12:00:00+00:00",
    **info,
) -> RunStore:
    """A run directory as the runner writes one (through its own store)."""
    fields = dict(
        run_id=run_id,
        game="zork1",
        story="zork1.z5",
        story_md5="0" * 32,
        title="Zork I",
        player="claude",
        mode="text",
        model="claude-test",
        max_turns=None,
        max_cost=None,
        max_seconds=None,
        multi=False,
        prompt_file=None,
        created=created,
        status=status,
        max_score=350,
    )
    store = RunStore.create(runs_dir, RunInfo(**{**fields, **info}))
    return store


def play_turn(store: RunStore, turn: int, command: str, location: str, score: int = 0, text: str = "") -> TurnRecord:
    record = TurnRecord(
        turn=turn,
        command=command,
        text=text or f"{location}\nYou are in the {location}.",
        score=score,
        moves=turn,
        location=location,
        done=False,
        won=False,
        reply=f"I should go {command}.\n<command>{command}</command>",
    )
    store.info.turns, store.info.score, store.info.moves = turn, score, turn
    store.record(record, None)
    store.save_info()
    return record


# -- the browser ---------------------------------------------------------------------------------
def chromium() -> str:
    path = os.environ.get("FROBOZZ_CHROMIUM") or shutil.which("chromium")
    if not path:
        raise RuntimeError(
            "the web view's tests need Debian's chromium: run bin/test (scripts/browser installs it), "
            "or set FROBOZZ_CHROMIUM"
        )
    return path


@pytest.fixture(scope="module")
def browser():
    """One Chromium for a module's tests (Playwright's sync API keeps its own event loop: not beside anyio's)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium())
        yield launched
        launched.close()


@pytest.fixture
def page(browser, site):
    """A browser tab, signed in through the link the server prints (`/?token=…`)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    tab.goto(f"{site}/?token={TOKEN}")
    yield tab
    context.close()


def screenshot(tab, path: Path, **options) -> Path:
    """Save a screenshot (of a page or one element) and check it shows something: many colours, and not one
    colour almost everywhere."""
    from PIL import Image

    tab.screenshot(path=str(path), **options)
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        size = image.width * image.height
    assert colours is not None and len(colours) > 50, f"{path.name} is nearly blank"
    assert max(count for count, _ in colours) < 0.97 * size, f"{path.name} is nearly one colour"
    return path
