import os
import signal

import anyio
import psutil
import pytest
from mcp import Client

from frobozz.games import walkthrough_for
from frobozz.servers.game import Settings, create_server
from tests.servers.mcp import call, error
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

TOOLS = {
    "list_games",
    "new_game",
    "act",
    "look",
    "inventory",
    "undo",
    "save",
    "restore",
    "list_saves",
    "map",
    "history",
    "end_game",
    "valid_actions",
}


async def test_every_tool_has_a_title_all_four_annotations_and_an_output_schema(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        a = tool.annotations
        assert a and a.title and tool.description, tool.name
        assert None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint), tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
    assert tools["look"].annotations.read_only_hint and not tools["act"].annotations.read_only_hint


async def test_the_walkthrough_through_act_wins_with_350_points(client):
    game = await call(client, "new_game", game="zork1")
    assert game["location"] == "West of House" and game["max_score"] == 350
    for command in walkthrough_for("b732a93a6244ddd92a9b9a3e3a46c687"):
        state = await call(client, "act", session_id=game["session_id"], command=command)
    assert (state["score"], state["max_score"], state["done"], state["won"]) == (350, 350, True, True)
    assert "350" in state["text"]


async def test_look_and_inventory_use_no_move(client):
    sid = (await call(client, "new_game", game="zork1"))["session_id"]
    await call(client, "act", session_id=sid, command="open mailbox")
    look = await call(client, "look", session_id=sid)
    inventory = await call(client, "inventory", session_id=sid)
    assert look["moves"] == inventory["moves"] == 1 and "mailbox" in look["text"]
    assert (await call(client, "act", session_id=sid, command="take leaflet"))["moves"] == 2


async def test_undo_history_and_map_follow_the_game(client):
    sid = (await call(client, "new_game", game="zork1"))["session_id"]
    for command in ["n", "e", "open window", "w"]:
        await call(client, "act", session_id=sid, command=command)
    history = await call(client, "history", session_id=sid, last=2)
    assert [t["command"] for t in history["turns"]] == ["open window", "w"]
    game_map = await call(client, "map", session_id=sid, format="mermaid")
    assert game_map["rooms"] == 4 and game_map["map"].startswith("flowchart LR")
    assert (await call(client, "map", session_id=sid, format="dot"))["map"].startswith("digraph")
    assert (await call(client, "undo", session_id=sid, steps=2))["location"] == "Behind House"
    assert (await call(client, "map", session_id=sid))["rooms"] == 3


async def test_saves_survive_a_server_restart(frobozz_env):
    async with Client(create_server(Settings())) as first:
        sid = (await call(first, "new_game", game="zork1"))["session_id"]
        for command in ["open mailbox", "take leaflet", "n"]:
            await call(first, "act", session_id=sid, command=command)
        saved = await call(first, "save", session_id=sid, slot="north")
        assert saved["turn"] == 3
    async with Client(create_server(Settings())) as second:
        assert "no game session" in await error(second, "act", session_id=sid, command="look")
        sid2 = (await call(second, "new_game", game="zork1"))["session_id"]
        assert [s["slot"] for s in (await call(second, "list_saves", session_id=sid2))["saves"]] == ["north"]
        state = await call(second, "restore", session_id=sid2, slot="north")
        assert (state["location"], state["moves"]) == ("North of House", 3)
        assert "leaflet" in (await call(second, "inventory", session_id=sid2))["text"]


async def test_the_unsupported_release_reports_real_score_and_moves(client):
    sid = (await call(client, "new_game", game="zork1-r119.z3"))["session_id"]
    for command in ["open mailbox", "take leaflet", "n", "e", "open window", "w", "take all"]:
        state = await call(client, "act", session_id=sid, command=command)
    assert (state["score"], state["moves"], state["location"], state["max_score"]) == (10, 7, "Kitchen", 350)
    assert not state["text"].startswith(">")


async def test_bad_input_gets_a_clear_error_and_changes_nothing(client):
    sid = (await call(client, "new_game", game="zork1"))["session_id"]
    await call(client, "act", session_id=sid, command="n")
    unknown = await error(client, "act", session_id="nope", command="look")
    assert "no game session 'nope'" in unknown and sid not in unknown  # (it listed the running ones: anyone's)
    assert "no game session" in await error(client, "look", session_id="")
    assert "no game 'zork9'" in await error(client, "new_game", game="zork9")
    assert "not a game name" in await error(client, "new_game", game="../../etc/passwd")
    assert "not a game name" in await error(client, "new_game", game="/work/shared/games/zork1.z5")
    assert "empty command" in await error(client, "act", session_id=sid, command="")
    assert "at most 198" in await error(client, "act", session_id=sid, command="n" * 1_000_000)
    assert "control characters" in await error(client, "act", session_id=sid, command="n\r\nsave")
    assert "invalid save slot" in await error(client, "save", session_id=sid, slot="../../x")
    assert "no save slot" in await error(client, "restore", session_id=sid, slot="never")
    assert "not sent to the game" in await error(client, "act", session_id=sid, command="quit")
    assert "cannot undo 5" in await error(client, "undo", session_id=sid, steps=5)
    assert (await client.call_tool("undo", {"session_id": sid, "steps": 0})).is_error
    assert (await client.call_tool("map", {"session_id": sid, "format": "svg"})).is_error
    assert (await client.call_tool("act", {"session_id": sid})).is_error  # a missing argument
    state = await call(client, "look", session_id=sid)
    assert (state["location"], state["moves"]) == ("North of House", 1)


async def test_a_file_that_is_not_a_story_is_refused_before_the_interpreter(tmp_path):
    games = tmp_path / "games"
    games.mkdir()
    (games / "noise.z5").write_bytes(bytes(range(256)) * 400)
    (games / "cut.z3").write_bytes((Settings().games_dir / "zork1-r119.z3").read_bytes()[:30_000])
    (games / "zork1.z5").write_bytes((Settings().games_dir / "zork1.z5").read_bytes())
    async with Client(create_server(Settings(games_dir=games))) as own:
        assert "not a Z-machine story" in await error(own, "new_game", game="noise")
        assert "truncated" in await error(own, "new_game", game="cut.z3")
        assert (await call(own, "new_game", game="zork1"))["location"] == "West of House"  # still serving


def _interpreters() -> list[psutil.Process]:
    """This process's live interpreter workers (an in-process server's are its children)."""
    found = []
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any("_worker.py" in a for a in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


async def test_a_game_whose_interpreter_died_between_calls_is_put_back_and_plays_on(client):
    sid = (await call(client, "new_game", game="zork1"))["session_id"]
    await call(client, "act", session_id=sid, command="open mailbox")
    (worker,) = _interpreters()
    os.kill(worker.pid, signal.SIGKILL)
    with anyio.fail_after(10):
        await eventually(lambda: not psutil.pid_exists(worker.pid))  # reaped by the server: between two calls
    assert "put back to turn 1" in await error(client, "act", session_id=sid, command="take leaflet")
    assert (await call(client, "act", session_id=sid, command="take leaflet"))["moves"] == 2
    assert "leaflet" in (await call(client, "inventory", session_id=sid))["text"]
    assert (await call(client, "undo", session_id=sid))["moves"] == 1


async def test_a_game_that_cannot_keep_its_journal_is_a_clear_error_and_leaves_no_interpreter(frobozz_env):
    sessions_dir = Settings().sessions_dir
    sessions_dir.parent.mkdir(parents=True, exist_ok=True)
    sessions_dir.write_text("a file where the journals' folder should be")
    async with Client(create_server(Settings())) as client:
        for _ in range(3):
            message = await error(client, "new_game", game="zork1")
            assert f"journal could not be made in {sessions_dir}" in message, message
        assert _interpreters() == []


async def test_ending_a_game_frees_its_session(client):
    sid = (await call(client, "new_game", game="zork1"))["session_id"]
    ended = await call(client, "end_game", session_id=sid)
    assert ended == {"session_id": sid, "turns": 0, "score": 0, "max_score": 350, "won": False}
    assert "no game session" in await error(client, "act", session_id=sid, command="look")
    assert "no game session" in await error(client, "end_game", session_id=sid)


async def test_the_session_limit_is_enforced_with_a_clear_message(frobozz_env):
    async with Client(create_server(Settings(max_sessions=2))) as client:
        first = (await call(client, "new_game", game="zork1"))["session_id"]
        await call(client, "new_game", game="zork1")
        assert "end one of yours with end_game" in await error(client, "new_game", game="zork1")
        await call(client, "end_game", session_id=first)
        await call(client, "new_game", game="zork1")


async def test_several_sessions_play_concurrently_through_one_server(client):
    sids = [(await call(client, "new_game", game=g))["session_id"] for g in ("zork1", "zork1", "zork1-r119")]
    async with anyio.create_task_group() as tg:
        for n, sid in enumerate(sids, 1):

            async def play(sid=sid, n=n):
                for _ in range(n):
                    await call(client, "act", session_id=sid, command="n")
                    await call(client, "act", session_id=sid, command="s")

            tg.start_soon(play)
    moves = [(await call(client, "look", session_id=sid))["moves"] for sid in sids]
    assert moves == [2, 4, 6]


async def test_list_games_shows_the_catalogue_with_what_is_installed(client):
    games = {g["name"]: g for g in (await call(client, "list_games"))["games"]}
    assert games["zork1"]["installed"] and games["zork1"]["license"] == "MIT"
    assert games["zork1-r119"]["max_score"] == 350
