"""The game server's part in `play --memory` (tools mode): memories recalled with each act's answer, and
the runner's notes and pauses through the mailbox."""

import json

import anyio
import pytest
from mcp import Client

from frobozz._mailbox import Mailbox
from frobozz.memory import MemoryService
from frobozz.servers import load_server
from frobozz.servers.game import Settings, create_server
from tests.black_hole import BlackHole
from tests.memory_parts import PartsStarted
from tests.memory_services import ServicesSeen
from tests.servers.mcp import call, error
from tests.waiting import eventually

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


async def _remembered(settings) -> str:
    """The kitchen's note and another in zork1's namespace; the id of a memory-loop session to recall in."""
    service = MemoryService(settings)
    try:
        store, sessions = await service.store(), await service.sessions()
        for note in (KITCHEN, UNRELATED):
            await store.store(note, {}, "zork1")
        return (await sessions.open("zork1", client="test")).id
    finally:
        await service.aclose()


async def _to_the_kitchen_and_back(server) -> list[dict]:
    async with Client(server) as client:
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        return [await call(client, "act", session_id=sid, command=c) for c in [*TO_KITCHEN, "e", "w"]]


def _kitchen_recalled_once(answers: list[dict]) -> None:
    recalled = [(a["location"], a.get("recalled", [])) for a in answers if a.get("recalled")]
    assert len(recalled) == 1 and recalled[0][0] == "Kitchen"  # there, and not again on coming back
    assert [KITCHEN in line and line.startswith("- [memory ") for line in recalled[0][1]] == [True]


async def test_an_act_brings_back_the_memories_for_its_room_once_in_a_run(frobozz_env, cortex_settings, monkeypatch):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    run = await _remembered(cortex_settings)
    settings = Settings(game_recall_namespace="zork1", game_recall_session=run)
    _kitchen_recalled_once(await _to_the_kitchen_and_back(create_server(settings)))


async def test_a_server_given_no_service_opens_its_own_for_recall_and_closes_it(
    frobozz_env, cortex_settings, monkeypatch
):
    """The stdio server (`frobozz serve game`): its recall's pool and embedding model are its own, closed with it."""
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    run = await _remembered(cortex_settings)
    seen = ServicesSeen(monkeypatch)
    settings = Settings(game_recall_namespace="zork1", game_recall_session=run)
    _kitchen_recalled_once(await _to_the_kitchen_and_back(create_server(settings)))
    assert len(seen.made) == 1 and len(seen.pools) == 1 and seen.closed == seen.made


async def test_a_server_made_with_the_process_s_service_recalls_on_its_pool_and_model_and_leaves_it_open(
    frobozz_env, cortex_settings, monkeypatch
):
    """In a process that serves several servers (a memory run's, in tools mode): `load_server` gives the game server
    a service sharing the process's, as it gives cortex and handoff; it makes no pool nor embedding model of its
    own, and closes nothing of the process's."""
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())  # (as the run's)
    run = await _remembered(cortex_settings)
    service = MemoryService(cortex_settings)
    try:
        pool = (await service.store()).pool
        seen = ServicesSeen(monkeypatch)
        server = load_server("game", service=service, game_recall_namespace="zork1", game_recall_session=run)
        _kitchen_recalled_once(await _to_the_kitchen_and_back(server))
        assert seen.made and seen.embedders == [service.embedder] and seen.pools == [pool]
        assert seen.closed == []
        assert [m.content for m in await (await service.store()).recent(5, "zork1")]  # the pool is still open
    finally:
        await service.aclose()


async def test_a_server_that_does_not_recall_takes_no_service(frobozz_env, cortex_settings, monkeypatch):
    service = MemoryService(cortex_settings)
    try:
        seen = ServicesSeen(monkeypatch)
        async with Client(load_server("game", service=service)) as client:
            sid = (await call(client, "new_game", game="zork1"))["session_id"]
            assert "recalled" not in await call(client, "act", session_id=sid, command="open mailbox")
        assert seen.made == []
    finally:
        await service.aclose()


async def test_with_the_database_away_acts_answer_without_recall(frobozz_env, monkeypatch):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none")
    settings = Settings(game_recall_namespace="zork1", game_recall_session="00000000-0000-0000-0000-000000000000")
    async with Client(create_server(settings)) as client:
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        answer = await call(client, "act", session_id=sid, command="open mailbox")
    assert answer["moves"] == 1 and "recalled" not in answer


async def test_with_the_database_hung_one_act_goes_without_recall_the_next_start_none_and_memory_comes_back(
    frobozz_env, cortex_settings, caplog, monkeypatch
):
    """A database that accepts and never answers: recall after every act waited out its bound. Now the first act
    finds it silent and memory is off (said once); the next acts start no recall, until a probe finds the database
    answering again."""
    from frobozz.memory import MemorySettings
    from frobozz.servers.game._move_recall import MoveRecall

    in_kitchen = ("Kitchen", "You are in the kitchen of the white house. On the table is an elongated brown sack.")
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            await (await service.store()).store(KITCHEN, {}, "zork1")
            run = (await (await service.sessions()).open("zork1", client="test")).id
            recall = MoveRecall(Settings(game_recall_namespace="zork1", game_recall_session=run), service)
            await recall.start()
            parts = PartsStarted(monkeypatch)
            hole.hang()
            with anyio.fail_after(60):
                first = await recall(*in_kitchen)
            hung, turned_off = parts.since(0), parts.mark()
            with anyio.fail_after(60):
                second = await recall(*in_kitchen)
            off = parts.since(turned_off)
            hole.answer()
            with anyio.fail_after(30):
                await eventually(service.answering_now)  # a probe, due every few seconds, finds it back
            third = await recall(*in_kitchen)
        finally:
            await service.aclose()
    assert (first, second) == ([], [])  # the acts answered without memory
    assert caplog.text.count("memory is off: the database does not answer (recall: slower than") == 1
    assert hung == ["recall"] and off == []  # the first waited its bound; the next act started no recall
    assert "was left out" not in caplog.text  # the one line says it
    assert [KITCHEN in line for line in third] == [True]
