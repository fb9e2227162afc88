"""Tools mode's gate on game calls: which calls it orders is what the game server says of its own tools."""

import pytest
from mcp import Client

from frobozz.runner._session_parts import CHANGING, GAME_TOOLS
from frobozz.servers.game import Settings, create_server

pytestmark = pytest.mark.anyio


async def test_the_calls_the_gate_puts_in_order_are_the_game_tools_that_are_not_read_only(frobozz_env):
    """claude runs read-only tools side by side: a gate that made one wait for another could hold both."""
    async with Client(create_server(Settings())) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(CHANGING) == {name for name in GAME_TOOLS if not tools[name].annotations.read_only_hint}
