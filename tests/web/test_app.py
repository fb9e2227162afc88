"""The web view as a whole: a run with nothing in it yet, a run known only to the database followed live,
and a database that goes away under it and comes back, with nothing lost."""

import re

import anyio
import pytest

from frobozz.memory import MemoryService
from frobozz.runner import RunLedger
from tests.database import admin, database_name
from tests.web.conftest import new_run, play_turn
from tests.web.test_runs import events


def test_a_run_with_no_turn_yet_says_so_and_its_stream_waits_for_the_first(client, web_settings):
    store = new_run(web_settings.runs_dir, status="queued")
    page = client.get(f"/runs/{store.info.run_id}").text
    assert 'id="no-turns"' in page and "No room seen yet" in page and "No score yet" in page
    assert "data-events" in page  # queued: the page listens for its first turn
    seen = []
    with client.stream("GET", f"/runs/{store.info.run_id}/events") as stream:
        for event, ident, data in events(stream.iter_lines()):
            seen.append((event, ident))
            if len(seen) == 2:  # the first look: no turn, its figures empty
                assert "No room seen yet" in data or "queued" in data
                play_turn(store, 1, "north", "North of House")
                store.info.status = "finished"
                store.save_info()
            if event == "end":
                break
    assert ("turn", "1") in seen and seen[-1] == ("end", None)


def test_a_run_known_only_to_the_database_is_followed_live_to_its_end(client, web_settings):
    store = new_run(web_settings.runs_dir, "20261123-140000-dddddd")
    first = play_turn(store, 1, "north", "North of House")
    second = play_turn(store, 2, "east", "Behind House", 5)

    async def ledger_do(*steps):
        ledger = await RunLedger.open(web_settings)
        try:
            for step in steps:
                await step(ledger)
        finally:
            await ledger.aclose()

    info = store.info
    info.turns = 1
    anyio.run(ledger_do, lambda ledger: ledger.add(info, queued=False), lambda ledger: ledger.record(info, first, None))
    for path in store.dir.iterdir():  # played by a worker on another machine
        path.unlink()
    store.dir.rmdir()
    seen = []
    with client.stream("GET", f"/runs/{info.run_id}/events", params={"after": 1}) as stream:
        for event, ident, _ in events(stream.iter_lines()):
            seen.append((event, ident))
            if len(seen) == 2:
                info.turns = 2
                anyio.run(ledger_do, lambda ledger: ledger.record(info, second, None))
            elif event == "turn":
                info.status, info.reason = "finished", "max turns"
                anyio.run(ledger_do, lambda ledger: ledger.save(info))
            if event == "end":
                break
    assert [ident for event, ident in seen if event == "turn"] == ["2"] and seen[-1] == ("end", None)


def test_a_database_that_goes_away_is_said_plainly_and_once_back_everything_is_there(
    client, web_settings, postgres, monkeypatch
):
    import frobozz.web._lazy_store

    monkeypatch.setattr(frobozz.web._lazy_store, "RETRY_SECONDS", 0.0)
    name = database_name(web_settings)
    local = new_run(web_settings.runs_dir, status="finished")
    play_turn(local, 1, "north", "North of House")

    async def remember():
        service = MemoryService(web_settings)
        try:
            await (await service.store()).store("The grating is locked from below.")
        finally:
            await service.aclose()

    anyio.run(remember)
    assert "The grating is locked" in client.get("/memory").text and "Leaderboard" in client.get("/").text
    anyio.run(admin, postgres, f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
    try:
        anyio.run(
            admin,
            postgres,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
        )
        gone = client.get("/memory", params={"q": "grating"})
        assert gone.status_code == 503 and "not reachable" in gone.text
        runs = client.get("/")
        assert runs.status_code == 200 and local.info.run_id in runs.text and "not reachable" in runs.text
        assert "&gt; north" in client.get(f"/runs/{local.info.run_id}").text  # this machine's runs still show
    finally:
        anyio.run(admin, postgres, f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
    back = client.get("/memory", params={"q": "grating"})
    assert back.status_code == 200 and "The grating is locked" in back.text.split("Newest")[0]
    again = client.get("/")
    assert "Leaderboard" in again.text and "not reachable" not in again.text


@pytest.mark.parametrize("path", ["/nowhere", "/runs", "/memory/abc", "/letters/-1", "/static/../pyproject.toml"])
def test_a_page_that_does_not_exist_is_a_plain_not_found(client, path):
    missing = client.get(path)
    assert missing.status_code == 404 and "<h1>Not found</h1>" in missing.text


def test_links_and_redirects_are_paths_on_this_site_whatever_host_the_request_names(client, web_settings):
    """A page's links were absolute URLs built from the request's Host header, which the client sets (a proxy's
    inside name, or a forged one): every link now is a path."""
    page = client.get("/memory", headers={"Host": "evil.example"})
    assert page.status_code == 200 and "evil.example" not in page.text
    links = re.findall(r'(?:href|src|action|data-[a-z]+)="([^"]*)"', page.text)
    assert links and all(link.startswith("/") and not link.startswith("//") for link in links), links
