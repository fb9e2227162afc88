"""A queued run taken up after its worker died asks the game server which turns its record missed: a real
`frobozz serve game` process, as the runner starts it, and one that never answers."""

import logging
import sys

import anyio
import pytest
from mcp import Client

from frobozz.runner._catch_up import missed_turns, told_turn
from frobozz.servers.game import Settings, create_server
from tests.servers.mcp import call

pytestmark = pytest.mark.anyio

GAME = {
    "command": sys.executable,
    "args": ["-m", "frobozz", "serve", "game"],
    "env": {"FROBOZZ_GAME_SHARED_SESSIONS": "true"},
}


async def test_the_turns_the_game_played_after_the_records_last_are_read_from_another_server_process(frobozz_env):
    async with Client(create_server(Settings(game_shared_sessions=True))) as here:
        sid = (await call(here, "new_game", game="zork1"))["session_id"]
        for command in ("open mailbox", "take leaflet", "read leaflet"):
            await call(here, "act", session_id=sid, command=command)
        recorded = (await call(here, "history", session_id=sid))["turns"][1]  # the record has the first act only
        with anyio.fail_after(120):
            missed = await missed_turns(GAME, sid, told_turn(recorded))
            assert [t.command for t in missed] == ["take leaflet", "read leaflet"]
            assert [t.moves for t in missed] == [2, 3]
            latest = missed[-1]
            assert await missed_turns(GAME, sid, latest) == []  # the record has them all
            assert len(await missed_turns(GAME, sid, None)) == 3  # no record yet: every move the game made


async def test_a_session_the_game_does_not_know_misses_nothing(frobozz_env):
    with anyio.fail_after(120):
        assert await missed_turns(GAME, "0123456789abcdef", None) == []


async def test_a_game_server_that_never_answers_is_given_up_on_within_the_bound_and_misses_nothing(frobozz_env, caplog):
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    caplog.set_level(logging.WARNING, "frobozz.runner")
    with anyio.fail_after(60):
        assert await missed_turns(silent, "0123456789abcdef", None, within=2) == []
    assert "did not answer within 2 s" in caplog.text


async def test_a_game_server_that_cannot_start_misses_nothing(frobozz_env, caplog):
    caplog.set_level(logging.WARNING, "frobozz.runner")
    with anyio.fail_after(60):
        assert await missed_turns({"command": "/nonexistent/frobozz", "args": []}, "0123456789abcdef", None) == []
    assert "could not read the game's history" in caplog.text
