"""Scoped tokens (`FROBOZZ_HUB_TOKENS`) on a real loopback hub: two tokens, two namespaces, no leak either
way through any cortex or handoff tool, and a call outside a grant changes nothing."""

import httpx
import pytest

from frobozz._loopback import LoopbackServer
from frobozz.servers._grants import Grant, hashed, load_grants
from frobozz.servers._http import hub_app, new_token
from tests.servers.mcp import call, error
from tests.servers.test_http import hub_client

pytestmark = pytest.mark.anyio
ALICE, BOB = new_token(), new_token()
GRANTS = [
    Grant(name="alice", sha256=hashed(ALICE), servers=["cortex", "handoff"], write=["alice"], read=["team"]),
    Grant(name="bob", sha256=hashed(BOB), servers=["cortex", "handoff"], write=["bob", "team"]),
]


@pytest.fixture
def hub(cortex_settings):
    url = cortex_settings.database_url.get_secret_value()
    overrides = {"cortex": {"database_url": url}, "handoff": {"database_url": url, "session_id": "scoped"}}
    with LoopbackServer(
        hub_app(["cortex", "handoff", "fetch"], None, grants=GRANTS, **overrides), lifespan="on"
    ) as server:
        yield server.url


async def test_an_empty_namespace_is_readable_by_its_owner_and_refused_to_the_other(hub):
    async with hub_client(f"{hub}/cortex/mcp", ALICE) as alice:
        assert (await call(alice, "recent", namespace="alice"))["memories"] == []
        assert (await call(alice, "search", query="anything", namespace="alice"))["results"] == []
    async with hub_client(f"{hub}/cortex/mcp", BOB) as bob:
        assert "token 'bob' may not read namespace 'alice'" in await error(bob, "recent", namespace="alice")


async def test_two_tokens_keep_to_their_namespaces_through_every_cortex_tool(hub):
    async with hub_client(f"{hub}/cortex/mcp", ALICE) as alice:
        mine = await call(alice, "store", content="Alice keeps the lantern in the attic.", namespace="alice")
        refused = await error(alice, "store", content="Alice writes into Bob's notes.", namespace="bob")
        assert "token 'alice' may not write namespace 'bob' (it may write: alice)" in refused
        assert "may not write namespace 'team'" in await error(alice, "store", content="x", namespace="team")
        assert "may not write namespace 'default'" in await error(alice, "store", content="no namespace given")
    async with hub_client(f"{hub}/cortex/mcp", BOB) as bob:
        shared = await call(bob, "store", content="The team meets at the white house.", namespace="team")
        secret = await call(bob, "store", content="Bob hides the jewels under the rug.", namespace="bob")
        for tool, args in [
            ("search", {"query": "lantern attic", "namespace": "alice"}),
            ("recent", {"namespace": "alice"}),
        ]:
            assert "token 'bob' may not read namespace 'alice'" in await error(bob, tool, **args)
        for tool, args in [
            ("get", {"id": mine["id"]}),
            ("update", {"id": mine["id"], "content": "Bob was here."}),
            ("supersede", {"old_id": mine["id"], "content": "Bob was here."}),
            ("forget", {"id": mine["id"]}),
        ]:
            message = await error(bob, tool, **args)
            assert f"memory {mine['id']}" in message and "alice" not in message  # the namespace is not named
    async with hub_client(f"{hub}/cortex/mcp", ALICE) as alice:
        assert (await call(alice, "get", id=mine["id"]))["content"] == "Alice keeps the lantern in the attic."
        assert (await call(alice, "search", query="team meets", namespace="team"))["results"][0]["id"] == shared["id"]
        for tool, args in [
            ("get", {"id": secret["id"]}),
            ("forget", {"id": shared["id"]}),
            ("update", {"id": shared["id"], "metadata": {"x": 1}}),
            ("search", {"query": "jewels", "namespace": "bob"}),
        ]:
            assert "token 'alice' may not" in await error(alice, tool, **args)
        assert [m["content"] for m in (await call(alice, "recent", namespace="alice"))["memories"]] == [
            "Alice keeps the lantern in the attic."
        ]  # nothing Bob tried changed it
    async with hub_client(f"{hub}/cortex/mcp", BOB) as bob:
        assert (await call(bob, "get", id=shared["id"]))["metadata"] == {}  # nothing Alice tried changed it


async def test_two_tokens_keep_to_their_namespaces_through_every_handoff_tool(hub):
    async with hub_client(f"{hub}/handoff/mcp", ALICE) as alice:
        letter = await call(
            alice, "handoff", summary="Alice's window ends.", memories=["Alice's note."], namespace="alice"
        )
        assert "may not write namespace 'bob'" in await error(alice, "handoff", summary="x", namespace="bob")
    async with hub_client(f"{hub}/handoff/mcp", BOB) as bob:
        for tool, args in [("latest_handoff", {"namespace": "alice"}), ("list_handoffs", {"namespace": "alice"})]:
            assert "token 'bob' may not read namespace 'alice'" in await error(bob, tool, **args)
        message = await error(bob, "read_handoff", id=letter["handoff_id"])
        assert "hand-off letter" in message and "alice" not in message
        assert (await call(bob, "latest_handoff", namespace="bob"))["handoff"] is None
    async with hub_client(f"{hub}/cortex/mcp", BOB) as bob:  # the letter's memory is Alice's too
        assert "may not read memory" in await error(bob, "get", id=letter["memory_ids"][0])
    async with hub_client(f"{hub}/handoff/mcp", ALICE) as alice:
        assert (await call(alice, "latest_handoff", namespace="alice"))["handoff"]["id"] == letter["handoff_id"]


async def test_a_server_outside_the_grant_and_a_token_not_in_the_file_are_refused(hub):
    def post(path, token):
        return httpx.post(
            f"{hub}{path}",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"},
        )

    outside, unknown, hashed_itself = (
        post("/fetch/mcp", ALICE),
        post("/cortex/mcp", new_token()),
        post("/cortex/mcp", hashed(ALICE)),
    )
    assert outside.status_code == 403 and "token 'alice' may not use the fetch server" in outside.json()["error"]
    assert unknown.status_code == hashed_itself.status_code == 401
    assert httpx.get(f"{hub}/healthz").text == "ok"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "token: Field required"),
        ("not toml [", "is not TOML"),
        ('[[token]]\nname = "a"\nsha256 = "abc"\nservers = ["cortex"]', "sha256"),
        ('[[token]]\nname = "a"\nsha256 = "' + "a" * 64 + '"\nservers = ["cortex"]\nread = ["../x"]', "read"),
        (
            '[[token]]\nname = "a"\nsha256 = "'
            + "a" * 64
            + '"\nservers = []\n[[token]]\nname = "a"\nsha256 = "'
            + "b" * 64
            + '"\nservers = []',
            "the same name",
        ),
        ('[[token]]\nname = "a"\ntoken = "in clear"\nsha256 = "' + "a" * 64 + '"\nservers = []', "token.0.token"),
    ],
)
def test_a_tokens_file_that_is_not_as_documented_is_a_clear_error(tmp_path, text, problem):
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match="FROBOZZ_HUB_TOKENS") as raised:
        load_grants(path)
    assert problem in str(raised.value)
    with pytest.raises(ValueError, match="cannot read"):
        load_grants(tmp_path / "missing.toml")


async def test_the_namespace_a_request_names_in_its_header_is_held_to_the_tokens_grant(hub):
    """X-Frobozz-Namespace (the default of a tool given none) is checked as a namespace given: alice writes her
    own through it, reads the team's and is refused bob's, by every cortex and handoff tool that takes one."""
    async with hub_client(f"{hub}/cortex/mcp", ALICE, **{"X-Frobozz-Namespace": "alice"}) as alice:
        mine = await call(alice, "store", content="Alice's header says her own namespace.")
        assert (await call(alice, "get", id=mine["id"]))["namespace"] == "alice"
    async with hub_client(f"{hub}/cortex/mcp", ALICE, **{"X-Frobozz-Namespace": "team"}) as alice:
        assert "token 'alice' may not write namespace 'team'" in await error(alice, "store", content="x")
        await call(alice, "recent")  # the team's she may read
        await call(alice, "search", query="anything")
    async with hub_client(f"{hub}/cortex/mcp", ALICE, **{"X-Frobozz-Namespace": "bob"}) as alice:
        assert "token 'alice' may not write namespace 'bob'" in await error(alice, "store", content="x")
        for tool, args in [("recent", {}), ("search", {"query": "jewels"})]:
            assert "token 'alice' may not read namespace 'bob'" in await error(alice, tool, **args)
    async with hub_client(f"{hub}/handoff/mcp", ALICE, **{"X-Frobozz-Namespace": "bob"}) as alice:
        assert "token 'alice' may not write namespace 'bob'" in await error(alice, "handoff", summary="x")
        for tool in ("latest_handoff", "list_handoffs"):
            assert "token 'alice' may not read namespace 'bob'" in await error(alice, tool)
    async with hub_client(f"{hub}/cortex/mcp", BOB, **{"X-Frobozz-Namespace": "bob"}) as bob:
        assert (await call(bob, "recent"))["memories"] == []  # nothing alice tried was kept
