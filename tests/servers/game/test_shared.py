"""Game sessions shared through the data directory: two server processes behind a load balancer
(here two servers in one test, each with its own interpreters) answer for the same game."""

import pytest
from mcp import Client

from frobozz.servers.game import Settings, create_server
from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio


async def test_either_server_plays_on_where_the_other_stopped(frobozz_env):
    settings = Settings(game_shared_sessions=True)
    async with Client(create_server(settings)) as one, Client(create_server(settings)) as two:
        game = await call(one, "new_game", game="zork1")
        sid = game["session_id"]
        assert (await call(two, "act", session_id=sid, command="open mailbox"))["moves"] == 1
        took = await call(one, "act", session_id=sid, command="take leaflet")  # one's copy was stale: picked up
        assert took["moves"] == 2 and "Taken" in took["text"]
        assert "leaflet" in (await call(two, "inventory", session_id=sid))["text"]
        assert (await call(two, "undo", session_id=sid))["moves"] == 1
        assert "leaflet" not in (await call(one, "inventory", session_id=sid))["text"].lower()
        history = await call(one, "history", session_id=sid)
        assert [t["command"] for t in history["turns"]] == [None, "open mailbox"]
        await call(two, "end_game", session_id=sid)
        assert "no game session" in await error(one, "look", session_id=sid)


async def test_unshared_sessions_stay_in_their_process(frobozz_env):
    async with Client(create_server(Settings())) as one, Client(create_server(Settings())) as two:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        assert "no game session" in await error(two, "look", session_id=sid)
    assert not list((frobozz_env / "sessions").glob("*.live.json"))


async def test_a_corrupt_shared_state_is_a_clear_error(frobozz_env):
    settings = Settings(game_shared_sessions=True)
    async with Client(create_server(settings)) as one, Client(create_server(settings)) as two:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        (settings.sessions_dir / f"{sid}.live.json").write_text("{not json")
        assert "could not be picked up" in await error(two, "look", session_id=sid)
