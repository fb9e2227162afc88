"""handoff against the real Postgres it shares with cortex, through the MCP client and over stdio."""

import os
import sys

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from frobozz.servers import cortex, handoff
from tests.servers.mcp import assert_conventions, call, error

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(cortex_settings):
    return handoff.Settings(database_url=cortex_settings.database_url.get_secret_value(), session_id="session-one")


async def test_a_letter_is_read_back_by_the_next_window_and_its_memories_reach_cortex(settings, cortex_settings):
    async with Client(handoff.create_server(settings)) as client:
        assert (await call(client, "latest_handoff"))["handoff"] is None
        sent = await call(
            client,
            "handoff",
            summary="Mapped the house; the lamp is in the living room.",
            next_steps=["open the trap door", "go down"],
            memories=["The grue lives in the dark."],
        )
        latest = (await call(client, "latest_handoff"))["handoff"]
        assert latest == await call(client, "read_handoff", id=sent["handoff_id"])
    assert latest["summary"] == "Mapped the house; the lamp is in the living room."
    assert latest["next_steps"] == ["open the trap door", "go down"] and latest["session_id"] == "session-one"
    assert [m["content"] for m in latest["memories"]] == ["The grue lives in the dark."]
    async with Client(cortex.create_server(cortex_settings)) as memory:
        found = await call(memory, "search", query="where does the grue live?")
    assert found["results"][0]["id"] == sent["memory_ids"][0]


async def test_letters_list_newest_first_and_namespaces_stay_apart(settings):
    async with Client(handoff.create_server(settings)) as client:
        first = await call(client, "handoff", summary="first letter")
        second = await call(
            client, "handoff", summary="second letter " + "x" * 500, next_steps=["a", "b"], memories=["m1", "m2"]
        )
        other = await call(client, "handoff", summary="another agent's letter", namespace="agent-b")
        listed = (await call(client, "list_handoffs"))["handoffs"]
        latest_b = (await call(client, "latest_handoff", namespace="agent-b"))["handoff"]
    assert [x["id"] for x in listed] == [second["handoff_id"], first["handoff_id"]]
    assert len(listed[0]["summary"]) == 300 and listed[0]["next_steps"] == 2
    assert [x["memories"] for x in listed] == [2, 0]  # how many it names (the list said 0 of every letter)
    assert latest_b["id"] == other["handoff_id"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"summary": "   "}, "summary is empty"),
        ({"summary": "ok\0"}, "NUL"),
        ({"summary": "y" * 100_001}, "at most 100000"),
        ({"summary": "ok", "next_steps": [""]}, "next steps"),
        ({"summary": "ok", "memories": ["fine", " "]}, "memories"),
        ({"summary": "ok", "namespace": "../etc"}, "invalid namespace"),
        ({"summary": "ok", "memories": ["m"] * 101}, "101"),
    ],
)
async def test_bad_letters_get_a_clear_error_and_write_nothing(settings, cortex_settings, arguments, message):
    async with Client(handoff.create_server(settings)) as client:
        assert message in await error(client, "handoff", **arguments)
        assert (await call(client, "list_handoffs"))["handoffs"] == []
        assert "no handoff 99" in await error(client, "read_handoff", id=99)
        assert (await client.call_tool("read_handoff", {"id": "; DROP TABLE handoffs"})).is_error
    async with Client(cortex.create_server(cortex_settings)) as memory:
        assert (await call(memory, "recent"))["memories"] == []


async def test_the_server_over_real_stdio_records_claudes_session_id(frobozz_env):
    env = {"FROBOZZ_DATA_DIR": os.environ["FROBOZZ_DATA_DIR"], "CLAUDE_CODE_SESSION_ID": "0f4e-session"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "frobozz", "serve", "handoff"], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == {"handoff", "latest_handoff", "read_handoff", "list_handoffs"}
        assert_conventions(tools)
        await call(client, "handoff", summary="Written over stdio.")
        latest = (await call(client, "latest_handoff"))["handoff"]
    assert latest["session_id"] == "0f4e-session" and latest["summary"] == "Written over stdio."


async def test_in_claudes_own_process_letters_are_signed_by_the_session_served_now_not_the_environments(
    cortex_settings, monkeypatch
):
    """Served in the process that runs claude (`frobozz chat`), no CLAUDE_CODE_SESSION_ID is claude's: one in the
    environment is a claude that process runs in. The session is asked at each letter (it changes on /clear)."""
    from frobozz.servers import load_server

    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "an-outer-claude")
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    now = ["first-session"]
    async with Client(load_server("handoff", session=lambda: now[0])) as client:
        await call(client, "handoff", summary="one")
        now[0] = "after-a-clear"
        await call(client, "handoff", summary="two")
        listed = (await call(client, "list_handoffs"))["handoffs"]
        signed = [(await call(client, "read_handoff", id=x["id"]))["session_id"] for x in listed]
    assert signed == ["after-a-clear", "first-session"]
