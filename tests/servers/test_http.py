"""`serve all --http`: every server in one ASGI app behind a bearer token, on real loopback HTTP."""

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from frobozz._loopback import LoopbackServer
from frobozz.servers import SERVERS
from frobozz.servers._http import hub_app, new_token
from frobozz.servers.forge.testing import FakeImageBackend
from tests.servers.mcp import assert_conventions, call, error

pytestmark = pytest.mark.anyio
TOKEN = new_token()


def hub_client(url: str, token: str = TOKEN, **headers: str) -> Client:
    return Client(
        streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=120)
        )
    )


@pytest.fixture
def overrides(cortex_settings):
    url = cortex_settings.database_url.get_secret_value()
    return {"cortex": {"database_url": url}, "handoff": {"database_url": url}}


async def test_every_server_answers_at_its_own_path_with_the_token(overrides):
    with (
        FakeImageBackend("sdwebui") as backend,
        LoopbackServer(
            hub_app(list(SERVERS), TOKEN, forge={"forge_url": backend.url}, **overrides), lifespan="on"
        ) as hub,
    ):
        for name in SERVERS:
            async with hub_client(f"{hub.url}/{name}/mcp") as client:
                tools = (await client.list_tools()).tools
                assert tools, name
                assert_conventions(tools)
        async with hub_client(f"{hub.url}/game/mcp") as client:
            game = await call(client, "new_game", game="zork1")
            assert "West of House" in (await call(client, "act", session_id=game["session_id"], command="look"))["text"]
        listing = httpx.get(f"{hub.url}/servers", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert set(listing["servers"]) == set(SERVERS) and listing["servers"]["cortex"]["endpoint"] == "/cortex/mcp"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},  # (the scheme's name in any case is taken: test_auth.py)
        {"Authorization": TOKEN},
    ],
)
async def test_requests_without_the_right_token_are_refused_and_health_is_open(overrides, headers):
    with LoopbackServer(hub_app(["cortex"], TOKEN, **overrides), lifespan="on") as hub:
        refused = httpx.post(
            f"{hub.url}/cortex/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        health = httpx.get(f"{hub.url}/healthz")
    assert refused.status_code == 401 and "Bearer" in refused.headers["www-authenticate"]
    assert "Authorization: Bearer TOKEN" in refused.json()["error"]
    assert health.text == "ok"


def test_a_short_token_is_refused():
    with pytest.raises(ValueError, match="at least 16"):
        hub_app(["fetch"], "short")


async def test_two_hub_processes_share_one_memory_through_postgres(overrides):
    """What one hub writes, another (a second process behind a load balancer) reads."""
    with (
        LoopbackServer(hub_app(["cortex", "handoff"], TOKEN, **overrides), lifespan="on") as one,
        LoopbackServer(hub_app(["cortex", "handoff"], TOKEN, **overrides), lifespan="on") as two,
    ):
        async with hub_client(f"{one.url}/cortex/mcp") as client:
            stored = await call(client, "store", content="The hub on machine one stored this.")
        async with hub_client(f"{one.url}/handoff/mcp") as client:
            letter = await call(client, "handoff", summary="Handed over from machine one.")
        async with hub_client(f"{two.url}/cortex/mcp") as client:
            found = await call(client, "search", query="what did machine one store?")
        async with hub_client(f"{two.url}/handoff/mcp") as client:
            latest = (await call(client, "latest_handoff"))["handoff"]
    assert found["results"][0]["id"] == stored["id"]
    assert latest["id"] == letter["handoff_id"]


async def test_over_http_a_letter_is_signed_by_the_session_its_request_names_never_by_the_hubs_environment(
    cortex_settings,
):
    """claude gives an HTTP server no session id of its own: `mcp-config --url` has it send X-Frobozz-Session-Id.
    The hub's environment names no client (a CLAUDE_CODE_SESSION_ID there is a claude the hub was started from)."""
    url = cortex_settings.database_url.get_secret_value()
    hub = hub_app(["handoff"], TOKEN, handoff={"database_url": url, "session_id": "the-claude-that-started-the-hub"})
    signed = {}
    with LoopbackServer(hub, lifespan="on") as served:
        endpoint = f"{served.url}/handoff/mcp"
        for name, headers in {
            "named": {"X-Frobozz-Session-Id": "5b0e1c3a-claude-session"},
            "unnamed": {},
            "empty": {"X-Frobozz-Session-Id": ""},  # ${FROBOZZ_SESSION_ID:-} with the variable unset
            "unexpanded": {"X-Frobozz-Session-Id": "${FROBOZZ_SESSION_ID}"},
        }.items():
            async with hub_client(endpoint, **headers) as client:
                letter = await call(client, "handoff", summary=f"Written {name}.")
                signed[name] = (await call(client, "read_handoff", id=letter["handoff_id"]))["session_id"]
        async with hub_client(endpoint, **{"X-Frobozz-Session-Id": "x" * 201}) as client:
            refused = await client.call_tool("handoff", {"summary": "Too long a session."})
            listed = (await call(client, "list_handoffs"))["handoffs"]
    assert signed == {"named": "5b0e1c3a-claude-session", "unnamed": None, "empty": None, "unexpanded": None}
    assert refused.is_error and "longer than 200" in refused.content[0].text and len(listed) == 4


@pytest.mark.parametrize("bad", [{"a": 1}, [1], True, None, 1.5])
def test_a_request_whose_id_cannot_be_answered_gets_an_invalid_request_error_not_silence(bad):
    """JSON-RPC ids are strings or numbers; the SDK took these for notifications and answered 202 with nothing,
    leaving the client to wait. A good id, a notification and a body that is not JSON go on as before."""
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with LoopbackServer(hub_app(["fetch"], TOKEN), lifespan="on") as hub:
        url = f"{hub.url}/fetch/mcp"
        refused = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "id": bad, "method": "ping"})
        answered = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "id": "p-1", "method": "ping"})
        notified = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        garbled = httpx.post(url, headers={**headers, "Content-Type": "application/json"}, content=b"{not json")
    assert refused.status_code == 400
    error = refused.json()
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "must be a string or an integer" in error["error"]["message"]
    assert answered.status_code == 200 and '"id":"p-1"' in answered.text.replace(" ", "")
    assert notified.status_code == 202
    assert garbled.status_code == 400 and "Parse error" in garbled.text


async def test_over_http_a_tool_given_no_namespace_works_in_the_one_the_request_names(overrides):
    """`mcp-config --url --namespace` (and the plugin installed with --hub --namespace) sends X-Frobozz-Namespace:
    a cortex or handoff tool given no namespace works in it (one given a namespace, in that one); without it, in
    the hub's default. A header that cannot name a namespace is refused for the call, nothing done, never taken
    for the default."""
    team, other = "ns-header-team", "ns-header-other"
    with LoopbackServer(hub_app(["cortex", "handoff"], TOKEN, **overrides), lifespan="on") as hub:
        cortex, handoff = f"{hub.url}/cortex/mcp", f"{hub.url}/handoff/mcp"
        async with hub_client(cortex, **{"X-Frobozz-Namespace": team}) as client:
            stored = await call(client, "store", content="The header's team keeps the brass lantern.")
            named = await call(client, "store", content="This one names its own namespace.", namespace=other)
            recent = [m["id"] for m in (await call(client, "recent"))["memories"]]
            found = [h["id"] for h in (await call(client, "search", query="brass lantern"))["results"]]
            kept = await call(client, "get", id=stored["id"])
            elsewhere = await call(client, "get", id=named["id"])
        async with hub_client(handoff, **{"X-Frobozz-Namespace": team}) as client:
            letter = await call(client, "handoff", summary="Handed over in the header's namespace.")
            latest = (await call(client, "latest_handoff"))["handoff"]
            listed = [x["id"] for x in (await call(client, "list_handoffs"))["handoffs"]]
        async with hub_client(cortex) as client:  # no header: the hub's default
            default = [m["id"] for m in (await call(client, "recent", limit=500))["memories"]]
        refused = {}
        for bad in ["${FROBOZZ_NAMESPACE}", "two words", "-leading-dash", "x" * 101]:
            async with hub_client(cortex, **{"X-Frobozz-Namespace": bad}) as client:
                for tool, args in [("store", {"content": "Never kept."}), ("search", {"query": "lantern"})]:
                    refused[bad, tool] = await error(client, tool, **args)
                refused[bad, "recent"] = await error(client, "recent")
            async with hub_client(handoff, **{"X-Frobozz-Namespace": bad}) as client:
                refused[bad, "handoff"] = await error(client, "handoff", summary="Never written.")
        async with hub_client(cortex, **{"X-Frobozz-Namespace": team}) as client:
            after = [m["content"] for m in (await call(client, "recent"))["memories"]]
    assert kept["namespace"] == team and elsewhere["namespace"] == other
    assert recent == [stored["id"]] and found[0] == stored["id"]
    assert latest["id"] == letter["handoff_id"] and latest["namespace"] == team and listed == [letter["handoff_id"]]
    assert stored["id"] not in default
    for (bad, tool), message in refused.items():
        assert "X-Frobozz-Namespace" in message and "invalid namespace" in message, (bad, tool, message)
    assert after == ["The header's team keeps the brass lantern."]  # nothing a refused call did was kept
