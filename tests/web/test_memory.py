"""The memory pages over real loopback HTTP on a real database: nothing first, then search with scores,
namespaces and dates, one memory, hand-off letters, forgetting (asked first, from this site only), bad
input, and scoped tokens that see only their namespaces."""

import re

import anyio
import httpx
import pytest

from frobozz._loopback import LoopbackServer
from frobozz.memory import MemoryService
from frobozz.servers._auth import ScopedTokens
from frobozz.servers._grants import Grant, hashed
from frobozz.servers._http import new_token
from frobozz.web import create_app

TROLL = "The troll in the Troll Room is killed with the sword; the lantern must be lit first."


def stored(settings, *items, letters=()):
    """Store memories (content, namespace) and letters (summary, namespace) as cortex and handoff would."""

    async def store():
        service = MemoryService(settings)
        try:
            memories = await service.store()
            ids = [(await memories.store(content, namespace=ns))[0].id for content, ns in items]
            handoffs = await service.handoffs()
            for summary, ns in letters:
                await handoffs.write(summary, ["go east"], [TROLL], ns, "a-session")
            return ids
        finally:
            await service.aclose()

    return anyio.run(store)


def test_an_empty_store_searches_to_nothing_and_lists_nothing(client):
    page = client.get("/memory", params={"q": "troll"})
    assert page.status_code == 200
    assert 'id="no-hits"' in page.text and 'id="no-memories"' in page.text and 'id="no-letters"' in page.text
    assert 'id="no-hits"' not in client.get("/memory").text  # no search: no results section


def test_a_search_finds_the_memory_with_its_score_and_opens_it(client, web_settings):
    troll, _ = stored(
        web_settings,
        (TROLL, "zork1"),
        ("A brass lantern is in the living room.", "zork1"),
        ("The troll is friendly.", "elsewhere"),
    )[:2]
    page = client.get("/memory", params={"q": "how do I get past the troll", "namespace": "zork1"}).text
    assert page.index(f"/memory/{troll}") < page.index("Newest in zork1")
    assert 'class="score"' in page and "The troll is friendly" not in page.split("Newest in")[0]
    assert "zork1 (2)" in page and "elsewhere (1)" in page  # the namespaces, with how many each holds
    one = client.get(f"/memory/{troll}").text
    assert TROLL in one and "zork1" in one and "Forget…" in one


def test_dates_narrow_a_search_and_a_bad_date_or_query_is_a_clear_error(client, web_settings):
    stored(web_settings, (TROLL, "default"))
    assert "/memory/" in client.get("/memory", params={"q": "troll", "since": "2020-01-01"}).text.split("Newest")[0]
    assert 'id="no-hits"' in client.get("/memory", params={"q": "troll", "until": "2020-01-01"}).text
    last = client.get("/memory", params={"q": "troll", "since": "0001-01-01", "until": "9999-12-31"})  # (a 500)
    assert last.status_code == 200 and "/memory/" in last.text.split("Newest")[0]
    for params in ({"since": "yesterday"}, {"q": "x" * 10_001}, {"q": "troll\x00"}, {"namespace": "../etc"}):
        bad = client.get("/memory", params=params)
        assert bad.status_code == 400 and "<h1>" in bad.text, params
    assert "at most 10,000" in client.get("/memory", params={"q": "x" * 10_001}).text  # as the CLI says
    assert client.get("/memory", params={"q": "troll " * 500}).status_code == 200  # what the CLI takes, the web does
    assert client.get("/memory/99999999999999999999999").status_code == 404
    assert client.get("/memory/424242").status_code == 404 and "no memory 424242" in client.get("/memory/424242").text
    assert client.get("/letters/424242").status_code == 404


def test_forgetting_asks_first_then_forgets_and_a_form_from_another_site_changes_nothing(client, web_settings):
    [troll] = stored(web_settings, (TROLL, "default"))
    ask = client.get(f"/memory/{troll}/forget")
    assert ask.status_code == 200 and "Forget memory" in ask.text and 'method="post"' in ask.text
    assert TROLL in client.get(f"/memory/{troll}").text  # asking changed nothing
    foreign = client.post(f"/memory/{troll}/forget", headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403 and TROLL in client.get(f"/memory/{troll}").text
    done = client.post(f"/memory/{troll}/forget", headers={"Origin": str(client.base_url).rstrip("/")})
    assert done.status_code == 303 and done.headers["location"] == f"/memory?namespace=default&forgotten={troll}"
    assert client.get(f"/memory/{troll}").status_code == 404
    assert 'id="no-hits"' in client.get("/memory", params={"q": "troll"}).text
    assert client.post(f"/memory/{troll}/forget").status_code == 404  # twice: nothing left to forget


def test_hand_off_letters_are_listed_and_open_with_the_memories_they_name(client, web_settings):
    stored(web_settings, letters=[("Reached the Troll Room with the sword and the lit lantern.", "default")])
    page = client.get("/memory").text
    assert "Reached the Troll Room" in page
    [letter] = re.findall(r'href="[^"]*(/letters/[0-9]+)"', page)
    opened = client.get(letter)
    assert opened.status_code == 200 and "go east" in opened.text and TROLL in opened.text


ALICE, BOB = new_token(), new_token()
GRANTS = [
    Grant(name="alice", sha256=hashed(ALICE), servers=["web"], read=["team"], write=["alice"]),
    Grant(name="bob", sha256=hashed(BOB), servers=["cortex"], write=["bob"]),
]


@pytest.fixture
def scoped(web_settings):
    with LoopbackServer(ScopedTokens(create_app(web_settings), GRANTS, frozenset()), lifespan="on") as server:
        yield server.url


def test_a_scoped_token_sees_only_its_namespaces_and_forgets_only_where_it_may_write(scoped, web_settings):
    mine, team, bobs = stored(
        web_settings, ("a note of alice", "alice"), ("a note of the team", "team"), ("a secret of bob", "bob")
    )
    alice = httpx.Client(base_url=scoped, headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
    page = alice.get("/memory", params={"namespace": "alice"}).text
    assert "alice (1)" in page and "team (1)" in page and "bob" not in page
    assert alice.get("/memory", params={"namespace": "bob"}).status_code == 403
    refused = alice.get(f"/memory/{bobs}")
    assert refused.status_code == 403 and "a secret of bob" not in refused.text
    assert "Forget…" not in alice.get(f"/memory/{team}").text  # read-only there
    assert alice.post(f"/memory/{team}/forget").status_code == 403
    assert "a note of the team" in alice.get(f"/memory/{team}").text
    assert "Forget…" in alice.get(f"/memory/{mine}").text
    bob = httpx.get(f"{scoped}/memory", headers={"Authorization": f"Bearer {BOB}"})
    assert bob.status_code == 403 and "may not use the web view" in bob.json()["error"]


def test_a_scoped_tokens_memory_tab_opens_on_a_namespace_it_may_read(scoped, web_settings):
    """The nav's link, /memory with no namespace, opened on the default namespace: a 403 for a scoped token."""
    stored(web_settings, ("a note of alice", "alice"), ("a note of the team", "team"), ("a default note", "default"))
    alice = httpx.Client(base_url=scoped, headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
    page = alice.get("/memory")
    assert page.status_code == 200 and "a note of alice" in page.text  # its write namespace first
    assert "a note of the team" not in page.text and "a default note" not in page.text
    assert alice.get("/memory", params={"namespace": "default"}).status_code == 403  # asked for: still refused
    reader = Grant(name="reader", sha256=hashed(READER), servers=["web"], read=["team", "alice"])
    with LoopbackServer(ScopedTokens(create_app(web_settings), [reader], frozenset()), lifespan="on") as server:
        read_only = httpx.get(f"{server.url}/memory", headers={"Authorization": f"Bearer {READER}"}, timeout=60)
    assert read_only.status_code == 200 and "a note of the team" in read_only.text  # its first read namespace
    assert "a note of alice" not in read_only.text


READER = new_token()


def porto_then_lisbon(web_settings) -> tuple[int, int]:
    """A fact that changed: Ana lived in Porto, and lives in Lisbon now; (old, new) ids."""
    [old] = stored(web_settings, ("Ana lives in Porto.", "default"))

    async def supersede():
        service = MemoryService(web_settings)
        try:
            return (await (await service.store()).supersede(old, "Ana lives in Lisbon now.")).id
        finally:
            await service.aclose()

    return old, anyio.run(supersede)


def test_a_superseded_memory_shows_when_and_by_which_and_the_fact_s_history(client, web_settings):
    old, new = porto_then_lisbon(web_settings)
    before, after = client.get(f"/memory/{old}").text, client.get(f"/memory/{new}").text
    assert 'id="superseded"' in before and f"/memory/{new}" in before and 'id="superseded"' not in after
    history = after.split('id="history"')[1]
    assert history.index("Ana lives in Porto.") < history.index("Ana lives in Lisbon now.") and "current" in history
    assert (
        "Ana lives in Porto." not in client.get("/memory", params={"q": "where does Ana live"}).text.split("Newest")[0]
    )


def test_forgetting_the_current_version_of_a_changed_fact_says_the_one_before_is_current_again(client, web_settings):
    old, new = porto_then_lisbon(web_settings)
    origin = {"Origin": str(client.base_url).rstrip("/")}
    done = client.post(f"/memory/{new}/forget", headers=origin, follow_redirects=True)
    assert done.status_code == 200
    [notice] = re.findall(r'<p class="notice" role="status">(.*?)</p>', done.text)
    assert f"Memory {new} was forgotten" in notice
    assert f"memory {old}, the version it superseded, is current again" in notice
    assert 'id="superseded"' not in client.get(f"/memory/{old}").text  # it is current indeed


def test_a_memory_s_image_shows_on_its_page_and_in_the_lists_and_is_served_only_to_who_may_read_it(
    client, scoped, web_settings
):
    import base64
    import io

    from PIL import Image

    from frobozz.memory import ImageInput

    data = io.BytesIO()
    Image.new("RGBA", (1200, 900), (200, 30, 30, 128)).save(data, "PNG")
    [plain] = stored(web_settings, ("The troll's bridge, no picture.", "default"))

    async def keep():
        service = MemoryService(web_settings)
        try:
            given = ImageInput(data=base64.b64encode(data.getvalue()).decode(), media_type="image/png")
            return [
                (await (await service.images()).remember(text, given, namespace=ns))[0].id
                for text, ns in (("The troll's bridge, drawn.", "default"), ("Bob's photo.", "bob"))
            ]
        finally:
            await service.aclose()

    drawn, bobs = anyio.run(keep)
    page = client.get(f"/memory/{drawn}").text
    assert f'/memory/{drawn}/image" width="768" height="576"' in page and "1200×900 image/png" in page
    assert 'id="image"' not in client.get(f"/memory/{plain}").text
    listed = client.get("/memory", params={"q": "troll bridge"}).text
    assert listed.count('class="has-image"') == 2  # in the results and in the newest, not beside the plain one
    thumbnail = client.get(f"/memory/{drawn}/image")
    assert (
        thumbnail.headers["content-type"] == "image/jpeg" and thumbnail.headers["x-content-type-options"] == "nosniff"
    )
    assert Image.open(io.BytesIO(thumbnail.content)).size == (768, 576)
    original = client.get(f"/memory/{drawn}/image", params={"original": "1"})
    assert original.headers["content-type"] == "image/png" and original.content == data.getvalue()
    assert client.get(f"/memory/{plain}/image").status_code == 404
    alice = httpx.Client(base_url=scoped, headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
    refused = alice.get(f"/memory/{bobs}/image")
    assert refused.status_code == 403 and not refused.content.startswith(b"\xff\xd8")

    async def forget():
        service = MemoryService(web_settings)
        try:
            await (await service.store()).forget(drawn)
        finally:
            await service.aclose()

    anyio.run(forget)  # a forgotten memory's image is served no more, the original neither
    for params in ({}, {"original": "1"}):
        gone = client.get(f"/memory/{drawn}/image", params=params)
        assert gone.status_code == 404 and not gone.content.startswith((b"\xff\xd8", b"\x89PNG"))
