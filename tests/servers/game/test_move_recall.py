"""The game server's part in `play --memory` (tools mode): memories recalled with each act's answer, and
the runner's notes and pauses through the mailbox."""

import json

import pytest
from mcp import Client

from frobozz._mailbox import Mailbox
from frobozz.memory import MemoryService
from frobozz.servers.game import Settings, create_server
from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio
KITCHEN = "In the Kitchen, the brown sack holds garlic: carry it past the vampire bat."
UNRELATED = "The loud room's echo stops when you say echo."
TO_KITCHEN = ["n", "e", "open window", "w"]


async def test_without_memory_an_answer_has_neither_recalled_memories_nor_notes(client):
    sid = (await call(client, "new_game", game="zork1"))["session_id"]
    result = await client.call_tool("act", {"session_id": sid, "command": "open mailbox"})
    assert "recalled" not in result.structured_content and "note" not in result.structured_content
    assert "recalled" not in json.loads(result.content[0].text)


async def test_a_note_in_the_mailbox_goes_with_the_next_answer_once_and_a_pause_refuses_moves(frobozz_env, tmp_path):
    mailbox = Mailbox(tmp_path / "mailbox")
    async with Client(create_server(Settings(game_mailbox=mailbox.folder))) as client:
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        assert "note" not in await call(client, "act", session_id=sid, command="open mailbox")
        mailbox.post("Your context window is 80% full.")
        mailbox.post("   ")  # nothing to say is not a note
        assert (await call(client, "look", session_id=sid))["note"] == "Your context window is 80% full."
        assert "note" not in await call(client, "look", session_id=sid)
        mailbox.pause("The run pauses here")
        for tool, args in [("act", {"command": "take leaflet"}), ("undo", {}), ("restore", {"slot": "x"})]:
            assert "The run pauses here (nothing was done)" in await error(client, tool, session_id=sid, **args)
        assert (await call(client, "look", session_id=sid))["moves"] == 1  # the game did not move
        mailbox.resume()
        assert (await call(client, "act", session_id=sid, command="take leaflet"))["moves"] == 2


async def test_an_act_brings_back_the_memories_for_its_room_once_in_a_run(frobozz_env, cortex_settings, monkeypatch):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    service = MemoryService(cortex_settings)
    try:
        store, sessions = await service.store(), await service.sessions()
        for note in (KITCHEN, UNRELATED):
            await store.store(note, {}, "zork1")
        run = await sessions.open("zork1", client="test")
    finally:
        await service.aclose()
    settings = Settings(game_recall_namespace="zork1", game_recall_session=run.id)
    async with Client(create_server(settings)) as client:
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        answers = [await call(client, "act", session_id=sid, command=c) for c in [*TO_KITCHEN, "e", "w"]]
    recalled = [(a["location"], a.get("recalled", [])) for a in answers if a.get("recalled")]
    assert len(recalled) == 1 and recalled[0][0] == "Kitchen"  # there, and not again on coming back
    assert [KITCHEN in line and line.startswith("- [memory ") for line in recalled[0][1]] == [True]


async def test_with_the_database_away_acts_answer_without_recall(frobozz_env, monkeypatch):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    settings = Settings(game_recall_namespace="zork1", game_recall_session="00000000-0000-0000-0000-000000000000")
    async with Client(create_server(settings)) as client:
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        answer = await call(client, "act", session_id=sid, command="open mailbox")
    assert answer["moves"] == 1 and "recalled" not in answer
