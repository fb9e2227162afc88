import pytest
from mcp import Client

from frobozz.servers.game import Settings, create_server


@pytest.fixture
async def client(frobozz_env):
    async with Client(create_server(Settings())) as client:
        yield client
