import os
import sys

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio


def _params() -> StdioServerParameters:
    env = {k: os.environ[k] for k in ("FROBOZZ_DATA_DIR", "FROBOZZ_GAMES_DIR")}
    return StdioServerParameters(command=sys.executable, args=["-m", "frobozz", "serve", "game"], env=env)


async def test_the_server_plays_over_real_stdio_and_its_saves_outlive_the_process(frobozz_env):
    async with Client(_params()) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"new_game", "act", "save", "restore"} <= tools
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        for command in ["open mailbox", "take leaflet", "n", "e", "open window", "w"]:
            state = await call(client, "act", session_id=sid, command=command)
        assert state["location"] == "Kitchen"
        await call(client, "save", session_id=sid, slot="kitchen")
        assert "control characters" in await error(client, "act", session_id=sid, command="\x00look")
    async with Client(_params()) as client:  # a new server process
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        state = await call(client, "restore", session_id=sid, slot="kitchen")
        assert (state["location"], state["moves"]) == ("Kitchen", 6)
        history = await call(client, "history", session_id=sid)
        assert [t["command"] for t in history["turns"]][-2:] == ["open window", "w"]
