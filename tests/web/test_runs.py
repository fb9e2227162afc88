"""The runs pages over real loopback HTTP: the table (empty first), filters, a run from this machine or only
from the database, hostile run ids, the live event stream, and a database that cannot be reached."""

import json
import re

import anyio
import httpx
import pytest

from frobozz._loopback import LoopbackServer
from frobozz.runner import RunLedger, RunStore, TurnRecord
from frobozz.servers._auth import BearerToken
from frobozz.web import WebSettings, create_app
from tests.web.conftest import TOKEN, new_run, play_turn


def test_with_no_run_anywhere_the_table_says_how_to_play_one_and_the_leaderboard_is_empty(client):
    page = client.get("/")
    assert page.status_code == 200
    assert "No runs yet" in page.text and "frobozz play zork1" in page.text
    assert "No finished runs yet" in page.text and "here and in the database" in page.text


def test_a_finished_run_played_here_only_is_on_the_leaderboard_too(client, web_settings):
    store = new_run(web_settings.runs_dir, status="finished", reason="max turns", player="walkthrough")
    play_turn(store, 1, "north", "North of House", 5)
    board = client.get("/").text.split("<h2>Leaderboard</h2>")[1]
    assert "No finished runs" not in board and ">walkthrough<" in board and ">5/350<" in board


def test_runs_are_listed_newest_first_and_filtered(client, web_settings):
    new_run(
        web_settings.runs_dir,
        "20261123-100000-aaaaaa",
        created="2026-11-23T10:00:00+00:00",
        status="finished",
        player="walkthrough",
        reason="won",
        won=True,
        score=350,
    )
    new_run(web_settings.runs_dir, "20261123-110000-bbbbbb", created="2026-11-23T11:00:00+00:00", mode="tools")
    page = client.get("/").text
    assert page.index("20261123-110000-bbbbbb") < page.index("20261123-100000-aaaaaa")
    only = client.get("/", params={"status": "finished"}).text
    assert "20261123-100000-aaaaaa" in only and "20261123-110000-bbbbbb" not in only
    assert "No runs match" in client.get("/", params={"game": "nothing-like-it"}).text
    assert client.get("/", params={"status": "<script>"}).status_code == 400


def test_a_run_page_shows_each_turn_its_reasoning_folded_the_chart_and_the_map(client, web_settings):
    store = new_run(web_settings.runs_dir, status="finished", reason="max turns")
    play_turn(store, 1, "north", "North of House", 0)
    play_turn(store, 2, "east", "Behind House", 5, text="Behind House\n<b>a window</b> is slightly ajar.")
    page = client.get(f"/runs/{store.info.run_id}").text
    assert 'id="turn-1"' in page and 'id="turn-2"' in page and "&gt; east" in page
    assert '<details class="reply">' in page and "I should go east." in page
    assert "&lt;b&gt;a window&lt;/b&gt;" in page  # the game's text is text, never markup
    assert 'class="room current"' in page and 'id="current-room">Behind House<' in page
    assert "<polyline" in page and "data-events" not in page  # finished: a static page
    assert ">turn</text>" in page and ">score</text>" in page and "max 350" in page  # the chart's axes say what


def test_an_unknown_or_hostile_run_id_is_not_found_and_nothing_is_written(client, web_settings):
    for run_id in (
        "20261123-000000-ffffff",
        "..%2F..%2Frun",
        "x" * 5000,
        "%2e%2e%2f%2e%2e%2fetc",
        "20261123-000000-ffffff%00",
    ):
        page = client.get(f"/runs/{run_id}")
        assert page.status_code == 404, run_id
        assert client.get(f"/runs/{run_id}/events").status_code == 404
    assert not web_settings.runs_dir.exists() or not any(web_settings.runs_dir.iterdir())


def only_in_the_database(web_settings, run_id: str = "20261123-130000-cccccc") -> None:
    """A finished run with one turn, played on another machine: in the database, nothing of it here."""
    store = new_run(web_settings.runs_dir, run_id, status="finished", reason="won", won=True)
    record = play_turn(store, 1, "open mailbox", "West of House", 0)

    async def record_it():
        ledger = await RunLedger.open(web_settings)
        try:
            await ledger.add(store.info, queued=False)
            await ledger.record(store.info, record, None)
        finally:
            await ledger.aclose()

    anyio.run(record_it)
    for path in store.dir.iterdir():
        path.unlink()
    store.dir.rmdir()


def test_a_run_known_only_to_the_database_is_listed_and_shown(client, web_settings):
    only_in_the_database(web_settings)
    assert "20261123-130000-cccccc" in client.get("/").text
    page = client.get("/runs/20261123-130000-cccccc").text
    assert "&gt; open mailbox" in page and "West of House" in page
    assert "Leaderboard" in client.get("/").text and "No finished runs" not in client.get("/").text


def test_a_nul_in_a_filter_or_a_run_id_is_refused_for_that_request_alone_and_the_database_stays(client, web_settings):
    only_in_the_database(web_settings)
    for name in ("game", "model", "mode", "player", "status"):
        refused = client.get("/", params={name: "zork\x00"})
        assert refused.status_code == 400 and "NUL" in refused.text, name
    for path in ("/runs/a%00b", "/runs/a%00b/events", "/runs/20261123-130000-cccccc%00"):
        assert client.get(path).status_code == 404, path
    assert client.get("/traces/a%00b").status_code == 400
    page = client.get("/").text  # the database was never taken for gone: the run only it knows is listed
    assert "went away" not in page and "20261123-130000-cccccc" in page and "Leaderboard" in page


def events(lines):
    """Server-sent events as (event, id, data) from a stream's lines."""
    event, ident, data = None, None, []
    for line in lines:
        if line == "":
            if event or data:
                yield event, ident, "\n".join(data)
            event, ident, data = None, None, []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def test_a_live_run_streams_each_new_turn_then_the_figures_and_ends_when_the_run_does(client, web_settings):
    store = new_run(web_settings.runs_dir)
    play_turn(store, 1, "north", "North of House")
    seen = []
    with client.stream("GET", f"/runs/{store.info.run_id}/events", params={"after": 1}) as stream:
        lines = stream.iter_lines()
        for event, ident, data in events(lines):
            seen.append((event, ident))
            if event == "status" and len(seen) == 2:  # the first look: nothing new yet
                play_turn(store, 2, "east", "Behind House", 5)
                play_turn(store, 3, "open window", "Behind House", 5)
            elif event == "status" and any(e == "turn" for e, _ in seen):
                store.info.status, store.info.reason = "finished", "max turns"
                store.save_info()
            elif event == "turn":
                assert f'id="turn-{ident}"' in data
            elif event == "figures" and ident is None and len(seen) > 3:
                assert "Behind House" in data and "<polyline" in data
            if event == "end":
                break
    turns = [ident for event, ident in seen if event == "turn"]
    assert turns == ["2", "3"] and seen[-1] == ("end", None)


NONE = "\N{EN DASH}"  # what a run's header shows for a score or moves not known


def _facts(html):
    """A run header's figures: {"score": "15/350", "turns": "3 of 400", ...}."""
    return dict(re.findall(r"<dt>(\w+)</dt><dd[^>]*>([^<]*)", html))


def _commit(store, turn, score, moves):
    """A turn committed as the runner commits one: its line, no new run.json (that is written at the end)."""
    record = TurnRecord(
        turn=turn,
        command="north",
        text="North of House",
        score=score,
        moves=moves,
        location="North of House",
        done=False,
        won=False,
    )
    store.record(record, None)


def test_a_live_runs_page_and_its_status_events_show_its_last_committed_turn(client, web_settings):
    """The header said `score (none)/350, turns 0 of 400, moves (none)` for all of a run, and so did its status events,
    which the browser puts over the header: run.json is written when a run starts and when it ends."""
    store = new_run(web_settings.runs_dir, max_turns=400)
    store.hold()  # played now, as by the runner
    try:
        path = f"/runs/{store.info.run_id}"
        empty = _facts(client.get(path).text)
        assert (empty["score"], empty["turns"], empty["moves"]) == (f"{NONE}/350", "0 of 400", NONE)  # nothing yet
        for n in (1, 2, 3):
            _commit(store, n, 5 * n, 10 + n)
        now = _facts(client.get(path).text)
        assert (now["status"].strip(), now["score"], now["turns"], now["moves"]) == (
            "running",
            "15/350",
            "3 of 400",
            "13",
        )
        assert '<td class="num">15/350</td>\n    <td class="num">3</td>' in client.get("/").text  # the list too
        statuses = []
        with client.stream("GET", f"{path}/events", params={"after": 3}) as stream:
            for event, _, data in events(stream.iter_lines()):
                if event == "status":
                    statuses.append(_facts(data))
                    if len(statuses) == 1:
                        _commit(store, 4, 25, 20)  # a turn played while the page looks
                    else:  # (the next: after turn 4's line)
                        break
        assert [(s["score"], s["turns"], s["moves"]) for s in statuses] == [
            ("15/350", "3 of 400", "13"),
            ("25/350", "4 of 400", "20"),
        ]
    finally:
        store.let_go()


def test_a_killed_runs_page_shows_the_moves_of_its_last_turn(client, web_settings):
    store = new_run(web_settings.runs_dir, max_turns=400)
    store.hold()
    _commit(store, 1, 0, 4)
    _commit(store, 2, 10, 9)
    store.let_go()  # killed: its run.json still says running, 0 turns
    facts = _facts(client.get(f"/runs/{store.info.run_id}").text)
    assert (facts["status"].strip(), facts["score"], facts["turns"], facts["moves"]) == (
        "stopped: killed",
        "10/350",
        "2 of 400",
        "9",
    )


def test_a_reconnecting_browser_gets_only_the_turns_after_the_last_it_saw(client, web_settings):
    store = new_run(web_settings.runs_dir, status="stopped", reason="interrupted")
    for n in range(1, 5):
        play_turn(store, n, "wait", "West of House")
    with client.stream("GET", f"/runs/{store.info.run_id}/events", headers={"Last-Event-ID": "2"}) as stream:
        seen = [(event, ident) for event, ident, _ in events(stream.iter_lines())]
    assert seen == [("turn", "3"), ("turn", "4"), ("figures", None), ("end", None)]
    assert client.get(f"/runs/{store.info.run_id}/events", params={"after": "many"}).status_code == 400


def test_with_the_database_unreachable_the_runs_here_are_still_listed_and_it_says_why(frobozz_env, tmp_path):
    settings = WebSettings(database_url="postgresql://nobody@127.0.0.1:1/nothing", web_poll_seconds=0.1)
    new_run(settings.runs_dir, status="finished")
    with LoopbackServer(BearerToken(create_app(settings), TOKEN), lifespan="on") as server:
        page = httpx.get(f"{server.url}/", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert page.status_code == 200 and "20261123-120000-abc123" in page.text
    assert "not reachable" in page.text and "Leaderboard" not in page.text


def test_a_reader_never_writes_to_a_live_runs_directory(client, web_settings):
    store = new_run(web_settings.runs_dir)
    record = play_turn(store, 1, "north", "North of House")
    # the runner commits a turn's snapshot a moment before its line: a reader in between must not write it
    from dataclasses import asdict, replace

    from frobozz._files import atomic_write

    later = replace(record, turn=2, command="east", location="Behind House")
    atomic_write(store.dir / "snapshot.json", json.dumps({"record": asdict(later)}).encode())
    before = (store.dir / "turns.jsonl").read_bytes()
    assert 'id="turn-2"' in client.get(f"/runs/{store.info.run_id}").text
    assert (store.dir / "turns.jsonl").read_bytes() == before
    assert [t.turn for t in RunStore.open(web_settings.runs_dir, store.info.run_id).turns(repair=False)] == [1, 2]


@pytest.mark.parametrize("path", ["/", "/runs/20261123-120000-abc123", "/memory", "/static/style.css"])
def test_every_page_needs_the_token(site, path):
    refused = httpx.get(f"{site}{path}")
    assert refused.status_code == 401 and "Bearer" in refused.headers["www-authenticate"]
    wrong = httpx.get(f"{site}{path}", headers={"Authorization": "Bearer not-the-token-at-all"})
    assert wrong.status_code == 401


@pytest.mark.parametrize("where", ["after", "Last-Event-ID"])
def test_a_turn_number_past_the_databases_is_refused_for_that_request_alone_and_the_database_stays(
    client, web_settings, where
):
    """A turn number past int4's, for a run only the database knows, reached its query: asyncpg refused the
    argument (an InterfaceError), and the runs store was taken for gone: every page said so for 5 s."""
    only_in_the_database(web_settings)
    path = "/runs/20261123-130000-cccccc/events"
    for after in (str(2**40), str(2**31), "-1"):
        asked = {"params": {"after": after}} if where == "after" else {"headers": {"Last-Event-ID": after}}
        refused = client.get(path, **asked)
        assert refused.status_code == 400 and "turn number" in refused.text, after
    page = client.get("/").text
    assert "went away" not in page and "20261123-130000-cccccc" in page and "Leaderboard" in page
    with client.stream("GET", path, params={"after": 2**31 - 1}) as stream:
        assert [event for event, _, _ in events(stream.iter_lines())] == ["figures", "end"]
