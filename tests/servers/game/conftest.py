import pytest
from mcp import Client

from frobozz.servers.game import Settings, create_server
from tests.servers.mcp import call, error  # noqa: F401 - the game tests import them from here


@pytest.fixture
async def client(frobozz_env):
    async with Client(create_server(Settings())) as client:
        yield client
