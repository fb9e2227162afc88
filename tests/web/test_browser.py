"""The web view in a real browser (Debian's chromium, driven by Playwright): a walkthrough run played by the
real CLI watched live and then found in the table, the map's current room, a memory search, the phone's
width, and the sign-in a browser without the token gets. Each page's screenshot is saved under the test's
folder and checked not to be blank."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from frobozz.memory import MemoryService
from tests.web.conftest import TOKEN, new_run, play_turn, screenshot

ROOMS_BEFORE_THE_HOUSE = ("West of House", "North of House", "Behind House")


def _play(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "frobozz", "play", "zork1", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "HOME": str(tmp_path / "home")},
    )


def _first_run(runs_dir, turns, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in runs_dir.glob("*/turns.jsonl"):
            if len(path.read_text().splitlines()) >= turns:
                return path.parent.name
        time.sleep(0.05)
    raise AssertionError(f"no run reached {turns} turns")


def shown_turns(page):
    return page.eval_on_selector_all("#turns .turn", "turns => turns.map(t => Number(t.id.slice(5)))")


def test_a_walkthrough_run_is_watched_live_without_a_reload_and_then_listed_finished(
    page, site, web_settings, tmp_path
):
    player = _play(tmp_path, "--player", "walkthrough", "--max-turns", "120", "--json")
    try:
        run_id = _first_run(web_settings.runs_dir, 3)
        page.goto(f"{site}/runs/{run_id}")
        page.evaluate("window.notReloaded = true")
        first = shown_turns(page)
        assert page.get_attribute("#run", "data-events")  # live: the page listens
        page.wait_for_function("document.querySelectorAll('#turns .turn').length >= 60", timeout=120_000)
        assert page.evaluate("window.notReloaded") is True  # the turns came in, the page stayed
        assert shown_turns(page)[: len(first)] == first and len(shown_turns(page)) > len(first)
        player.communicate(timeout=300)
        assert player.returncode == 0
        page.wait_for_selector("#status .status-finished", timeout=60_000)
    finally:
        player.kill()
    turns = shown_turns(page)
    assert turns == list(range(1, 121)) and page.get_attribute("#run", "data-events") is None
    current = page.get_attribute(".map .room.current", "data-room")
    assert current and current == page.inner_text("#current-room")
    assert current in page.inner_text("#turn-120 .where")  # the map marks where the last turn ended
    screenshot(page, tmp_path / "run.png")

    page.goto(f"{site}/")
    row = page.locator(f"table.runs tr:has(a[href$='{run_id}'])")
    assert "walkthrough" in row.inner_text() and "finished" in row.inner_text()
    screenshot(page, tmp_path / "runs.png")


def test_the_map_marks_the_room_of_the_last_turn_and_follows_it(page, site, web_settings, tmp_path):
    store = new_run(web_settings.runs_dir)
    play_turn(store, 1, "north", "North of House")
    page.goto(f"{site}/runs/{store.info.run_id}")
    assert page.get_attribute(".map .room.current", "data-room") == "North of House"
    play_turn(store, 2, "east", "Behind House", 0)
    page.wait_for_selector(".map .room.current[data-room='Behind House']")
    assert page.locator(".map .room").count() == 2
    screenshot(page, tmp_path / "map.png")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_score_chart_has_axis_titles_and_ticks_read_at_a_normal_size_and_fills_its_box(
    browser, site, web_settings, tmp_path, width
):
    store = new_run(web_settings.runs_dir, status="finished")
    for n in range(1, 46):
        play_turn(store, n, "north", f"Room {n % 7}", 5 * (n // 4))
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{site}/runs/{store.info.run_id}?token={TOKEN}")
        chart = page.locator("section.chart")
        assert chart.locator("text.title").all_text_contents() == ["turn", "score"]
        assert chart.locator("text.tick").all_text_contents()[:3] == ["0", "100", "200"]  # score, to max 350
        assert "max 350" in chart.locator("text.tick").all_text_contents()
        sizes = page.evaluate("""() => {
            const box = document.querySelector('section.chart'), svg = box.querySelector('svg');
            const inner = box.clientWidth - parseFloat(getComputedStyle(box).paddingLeft)
                          - parseFloat(getComputedStyle(box).paddingRight);
            return {svg: svg.getBoundingClientRect().width, inner,
                    text: Math.min(...[...box.querySelectorAll('text.tick')]
                                        .map(t => t.getBoundingClientRect().height))};
        }""")
        assert abs(sizes["svg"] - min(sizes["inner"], 42 * 16)) < 2, sizes  # as wide as its box
        assert sizes["text"] >= 10, sizes  # ticks readable, not scaled down to a few pixels
        screenshot(chart, tmp_path / "chart.png")
    finally:
        context.close()


def test_a_memory_search_in_the_page_returns_the_stored_memory_with_its_score(page, site, web_settings, tmp_path):
    text = "The troll in the Troll Room is killed with the sword; light the lantern first."

    async def store():
        service = MemoryService(web_settings)
        try:
            return (await (await service.store()).store(text, namespace="zork1"))[0].id
        finally:
            await service.aclose()

    with ThreadPoolExecutor(1) as thread:  # Playwright's own event loop holds this one
        memory_id = thread.submit(anyio.run, store).result()
    page.goto(f"{site}/memory")
    page.select_option("select[name=namespace]", "zork1")
    page.fill("input[name=q]", "how do I get past the troll?")
    page.click("form.search button")
    hit = page.locator("ol.hits li").first
    assert text in hit.inner_text() and float(hit.locator(".score").inner_text()) > 0
    screenshot(page, tmp_path / "memory.png")
    hit.locator("a").click()
    assert page.inner_text("pre.memory") == text and f"/memory/{memory_id}" in page.url
    screenshot(page, tmp_path / "memory-one.png")


def test_a_browser_without_the_token_is_refused_and_signs_in_with_it(browser, site, tmp_path):
    context = browser.new_context()
    try:
        page = context.new_page()
        refused = page.goto(f"{site}/memory")
        assert refused.status == 401 and "Sign in with this hub's token" in page.inner_text("#refused")
        assert page.inner_text("h1") == "Sign in" and "printed it when it started" in page.inner_text("main")
        assert (
            page.evaluate("getComputedStyle(document.querySelector('button')).backgroundColor") != "rgb(239, 239, 239)"
        )  # styled, not the browser's grey default
        screenshot(page.locator("body"), tmp_path / "refused.png")
        page.fill("input[name=token]", "not-the-token-not-the-token")
        page.click("button[type=submit]")
        assert "not this hub's token" in page.inner_text("#refused")
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_selector("form.search")  # back where it was going, signed in
        assert page.url.endswith("/memory")
        [cookie] = context.cookies()
        assert cookie["expires"] > time.time() + 29 * 86400  # it outlives the browser session
    finally:
        context.close()


@pytest.mark.parametrize("path", ["/", "/runs/20261123-120000-abc123", "/memory"])
def test_every_page_fits_a_phones_width(browser, site, web_settings, tmp_path, path):
    store = new_run(web_settings.runs_dir, status="finished")
    for n, room in enumerate(ROOMS_BEFORE_THE_HOUSE * 4, start=1):
        play_turn(store, n, "go on", room, n)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(f"{site}{path}?token={TOKEN}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        screenshot(page, tmp_path / "phone.png", full_page=True)
    finally:
        context.close()


def test_a_memory_s_image_loads_in_the_page_and_fits_a_phone(browser, site, web_settings, tmp_path):
    import base64
    import io

    from PIL import Image

    from frobozz.memory import ImageInput

    data = io.BytesIO()
    Image.new("RGB", (3000, 2000), "darkgreen").save(data, "JPEG")

    async def store():
        service = MemoryService(web_settings)
        try:
            given = ImageInput(data=base64.b64encode(data.getvalue()).decode(), media_type="image/jpeg")
            return (await (await service.images()).remember("The forest path, photographed.", given))[0].id
        finally:
            await service.aclose()

    with ThreadPoolExecutor(1) as thread:
        memory_id = thread.submit(anyio.run, store).result()
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(f"{site}/memory/{memory_id}?token={TOKEN}")
        image = page.locator("#image img")
        image.wait_for()
        page.wait_for_function("document.querySelector('#image img').complete")
        assert image.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [768, 512]
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        screenshot(page, tmp_path / "memory-image.png", full_page=True)
    finally:
        context.close()
