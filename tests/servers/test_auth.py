"""The hub's token check for browsers as well as MCP clients: the header, the cookie a sign-in leaves, the
printed sign-in link, the sign-in form, and scoped tokens that must name the web view to see it."""

from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from html import unescape

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from frobozz._loopback import LoopbackServer
from frobozz.servers._auth import COOKIE, SIGN_IN, BearerToken, ScopedTokens
from frobozz.servers._grants import Grant, hashed
from frobozz.servers._http import new_token

TOKEN = new_token()
HTML = {"Accept": "text/html,application/xhtml+xml"}


async def echo(request: Request) -> JSONResponse:
    grant = getattr(request.state, "grant", None)
    return JSONResponse(
        {"path": request.url.path, "query": str(request.query_params), "grant": grant.name if grant else None}
    )


APP = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])


@pytest.fixture
def gate():
    with LoopbackServer(BearerToken(APP, TOKEN)) as server:
        yield server.url


def test_nothing_passes_without_the_token_and_a_browser_gets_a_sign_in_form(gate):
    program = httpx.get(f"{gate}/memory")
    assert program.status_code == 401 and program.json()["error"].startswith("unauthorized")
    browser = httpx.get(f"{gate}/memory", headers=HTML)
    assert browser.status_code == 401 and 'name="token"' in browser.text and 'value="/memory"' in browser.text
    for cookie in ("", f"{COOKIE}=wrong-wrong-wrong-wrong", f"{COOKIE}=", "garbage;;==", f"{COOKIE}={'x' * 5000}"):
        assert httpx.get(f"{gate}/", headers={"Cookie": cookie}).status_code == 401, cookie
    # a control character in a header is refused by the HTTP parser (httptools) before any app sees it
    assert httpx.get(f"{gate}/", headers={"Cookie": "garbage;;==\x7f"}).status_code == 400


def test_a_browser_is_told_in_words_for_people_why_and_where_to_find_the_token(gate):
    page = unescape(httpx.get(f"{gate}/memory", headers=HTML).text)
    assert "Sign in with this hub's token to see this page." in page and "Authorization" not in page
    assert "printed it when it started" in page and "FROBOZZ_HUB_TOKEN" in page and "<style>" in page
    stale = unescape(httpx.get(f"{gate}/memory", headers={**HTML, "Cookie": f"{COOKIE}=an-old-token-from-before"}).text)
    assert "no longer takes" in stale and 'name="token"' in stale
    assert httpx.get(f"{gate}/memory").json()["error"].startswith("unauthorized: send")  # programs: as before


def test_the_sign_in_cookie_outlives_the_browser_session_with_an_expiry(gate):
    cookie = httpx.get(f"{gate}/?token={TOKEN}").headers["set-cookie"]
    fields = dict(part.strip().partition("=")[::2] for part in cookie.split(";"))
    assert fields["Max-Age"] == str(30 * 86400)
    expires = parsedate_to_datetime(fields["Expires"])
    assert timedelta(days=29) < expires - datetime.now(UTC) <= timedelta(days=30)


def test_the_printed_link_signs_in_once_and_leaves_the_token_out_of_the_address(gate):
    with httpx.Client(base_url=gate) as browser:
        signed = browser.get(f"/runs?game=zork1&token={TOKEN}")
        assert signed.status_code == 303 and signed.headers["location"] == "/runs?game=zork1"
        cookie = signed.headers["set-cookie"]
        assert f"{COOKIE}={TOKEN}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        after = browser.get("/runs?game=zork1")  # the cookie, from now on
        assert after.status_code == 200 and after.json()["query"] == "game=zork1"
    # the address as it was sent: decoded, a space sent the browser to "/", and %3F became the query's start
    encoded = httpx.get(f"{gate}/runs/a%20run%3Fx?token={TOKEN}&game=zork1")
    assert encoded.status_code == 303 and encoded.headers["location"] == "/runs/a%20run%3Fx?game=zork1"
    wrong = httpx.get(f"{gate}/runs?game=zork1&token=not-the-token-at-all", headers=HTML)
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    page = unescape(wrong.text)  # said as what it is (a link from an earlier start), not as a first visit
    assert "The link you followed carries a token this hub does not take" in page and SIGN_IN not in page
    assert 'value="/runs?game=zork1"' in page and "not-the-token" not in page  # (the form goes back without it)


def test_the_sign_in_form_sets_the_cookie_and_goes_back_only_to_a_page_of_this_site(gate):
    ok = httpx.post(f"{gate}/login", data={"token": TOKEN, "next": "/memory?q=troll"})
    assert ok.status_code == 303 and ok.headers["location"] == "/memory?q=troll" and TOKEN in ok.headers["set-cookie"]
    for away in (
        "https://evil.example/",
        "//evil.example/x",
        "javascript:alert(1)",
        "/\\evil.example/",  # browsers take these three for //evil.example/ (all three were let through)
        "/\t/evil.example/",
        "/\n/evil.example/",
    ):
        assert httpx.post(f"{gate}/login", data={"token": TOKEN, "next": away}).headers["location"] == "/", away
    linked = httpx.get(f"{gate}//evil.example/?token={TOKEN}")  # the printed link's way in: the same rule
    assert linked.status_code == 303 and linked.headers["location"] == "/"
    lower = httpx.get(f"{gate}/memory", headers={"Authorization": f"bearer {TOKEN}"})  # the scheme in any case
    assert lower.status_code == 200
    bad = httpx.post(f"{gate}/login", data={"token": "nope", "next": "/"}, headers=HTML)
    assert bad.status_code == 401 and "not this hub" in bad.text and "set-cookie" not in bad.headers
    huge = httpx.post(
        f"{gate}/login",
        content=b"token=" + b"x" * 100_000,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert huge.status_code == 413
    hostile = httpx.post(f"{gate}/login", data={"token": "", "next": '"><script>alert(1)</script>'}, headers=HTML)
    assert hostile.status_code == 401 and "<script>alert" not in hostile.text


ALICE, BOB = new_token(), new_token()
GRANTS = [
    Grant(name="alice", sha256=hashed(ALICE), servers=["web"], read=["team"]),
    Grant(name="bob", sha256=hashed(BOB), servers=["cortex"], write=["bob"]),
]


def test_a_scoped_token_sees_the_web_view_only_when_its_grant_names_it(cortex_settings):
    with LoopbackServer(ScopedTokens(APP, GRANTS, frozenset({"cortex"}))) as server:
        alice = httpx.get(f"{server.url}/memory", headers={"Authorization": f"Bearer {ALICE}"})
        assert alice.status_code == 200 and alice.json()["grant"] == "alice"  # the pages see who asks
        assert httpx.get(f"{server.url}/cortex/mcp", headers={"Authorization": f"Bearer {ALICE}"}).status_code == 403
        bob = httpx.get(f"{server.url}/", headers={"Cookie": f"{COOKIE}={BOB}", **HTML})
        assert bob.status_code == 403 and "may not use the web view" in bob.text and 'name="token"' not in bob.text
        assert "Your token does not open this page" in bob.text
        listing = httpx.get(f"{server.url}/servers", headers={"Authorization": f"Bearer {BOB}"})
        assert listing.status_code == 200  # which servers there are: any token may ask
        signed = httpx.get(f"{server.url}/?token={ALICE}")
        assert signed.status_code == 303 and ALICE in signed.headers["set-cookie"]
