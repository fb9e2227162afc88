import pytest
from mcp import Client

from frobozz.servers.game import Settings, create_server


@pytest.fixture
async def client(frobozz_env):
    async with Client(create_server(Settings())) as client:
        yield client


async def call(client: Client, tool: str, **arguments):
    """The tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error(client: Client, tool: str, **arguments) -> str:
    """The tool's error message; fails the test when the call succeeds."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) should have failed"
    return result.content[0].text
