import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from frobozz.games import (
    CommandError,
    GameError,
    GameLibrary,
    GameSession,
    GameSessionClosedError,
    GameSessionState,
    InterpreterCrashedError,
    SaveError,
    read_story,
    replay_journal,
    walkthrough_for,
)
from frobozz.games._interpreter import WorkerProcess
from tests.conftest import ZORK1, ZORK1_R119
from tests.games.stories import endless_loop_story, garbage_code_story

pytestmark = pytest.mark.anyio


@pytest.fixture
async def zork(settings):
    session = await GameSession.open(read_story(ZORK1), settings)
    yield session
    await session.aclose()


async def test_the_walkthrough_wins_zork1_with_350_points(zork):
    steps = walkthrough_for(zork.story.md5)
    assert len(steps) == 396 and zork.walkthrough == steps
    for command in steps:
        turn = await zork.act(command)
    assert (turn.score, zork.max_score, turn.done, turn.won) == (350, 350, True, True)
    assert zork.state is GameSessionState.OVER
    with pytest.raises(GameError, match="game is over"):
        await zork.act("look")
    assert (await zork.undo(1)).done is False and zork.state is GameSessionState.PLAYING


async def test_the_opening_turn_reports_location_and_status(zork):
    first = zork.current
    assert first.number == 0 and first.command is None
    assert "West of House" in first.text and first.location == "West of House"
    assert (first.score, first.moves, first.done, first.won) == (0, 0, False, False)
    assert zork.supported


async def test_look_and_inventory_do_not_advance_the_game(zork):
    await zork.act("open mailbox")
    before = zork.current
    look = await zork.peek("look")
    assert "West of House" in look.text and look.moves == before.moves
    inventory = await zork.peek("inventory")
    assert "empty-handed" in inventory.text
    after = await zork.act("take leaflet")
    assert after.moves == before.moves + 1 and after.number == before.number + 1


async def test_undo_goes_back_exactly_n_turns(zork):
    for command in ["open mailbox", "take leaflet", "n", "e"]:
        await zork.act(command)
    turn = await zork.undo(2)
    assert (turn.number, turn.location, turn.moves) == (2, "West of House", 2)
    again = await zork.act("n")
    assert again.location == "North of House"


async def test_undo_past_the_start_is_refused_and_changes_nothing(zork):
    await zork.act("n")
    with pytest.raises(GameError, match="1 can be undone"):
        await zork.undo(5)
    with pytest.raises(CommandError):
        await zork.undo(0)
    assert zork.current.location == "North of House" and zork.current.number == 1


async def test_a_save_survives_the_session_and_restores_in_a_new_one(settings, zork):
    for command in ["open mailbox", "take leaflet", "n", "e", "open window", "w"]:
        await zork.act(command)
    info = await zork.save("kitchen")
    assert (info.slot, info.turn, info.location) == ("kitchen", 6, "Kitchen")
    await zork.aclose()

    fresh = await GameSession.open(read_story(ZORK1), settings)
    try:
        assert [s.slot for s in fresh.list_saves()] == ["kitchen"]
        turn = await fresh.restore("kitchen")
        assert (turn.location, turn.moves, turn.number) == ("Kitchen", 6, 6)
        assert [t.command for t in fresh.history(3)] == ["e", "open window", "w"]
        assert "leaflet" in (await fresh.peek("inventory")).text
        with pytest.raises(GameError, match="0 can be undone"):
            await fresh.undo(1)  # the states before a save are not kept in it
        await fresh.act("w")
        assert (await fresh.undo(1)).location == "Kitchen"
    finally:
        await fresh.aclose()


async def test_bad_save_slots_and_missing_saves_get_clear_errors(zork):
    for slot in ["", "../escape", "a/b", "x" * 65, "with space", ".hidden", "nul\0"]:
        with pytest.raises(SaveError, match="invalid save slot"):
            await zork.save(slot)
    with pytest.raises(SaveError, match="no save slot 'nothing'"):
        await zork.restore("nothing")
    assert zork.list_saves() == []


async def test_a_corrupt_or_foreign_save_is_refused_and_the_game_is_unchanged(settings, zork):
    await zork.act("n")
    await zork.save("good")
    slot_file = settings.saves_dir / zork.story.md5 / "good.json"
    slot_file.write_text('{"format": 1, "story_md5": "', encoding="utf-8")
    with pytest.raises(SaveError, match="cannot be read"):
        await zork.restore("good")
    slot_file.write_text('{"format": 1, "story_md5": "0000", "info": {}, "turns": [], "state": {}}')
    with pytest.raises(SaveError, match="another story"):
        await zork.restore("good")
    assert zork.current.location == "North of House"


async def test_in_game_meta_commands_become_session_actions(zork):
    await zork.act("n")
    saved = await zork.act("save")
    assert "quicksave" in saved.text and [s.slot for s in zork.list_saves()] == ["quicksave"]
    await zork.act("e")
    restored = await zork.act("RESTORE quicksave")
    assert restored.location == "North of House" and "Restored" in restored.text
    await zork.act("e")
    assert (await zork.act("undo")).location == "North of House"
    restarted = await zork.act("restart")
    assert restarted.number == 0 and restarted.location == "West of House"
    for meta in ["quit", "q", "script"]:
        with pytest.raises(CommandError, match="not sent to the game"):
            await zork.act(meta)


@pytest.mark.parametrize(
    "command, message",
    [
        ("", "empty command"),
        ("   ", "empty command"),
        ("x" * 1_000_000, "at most 198"),
        ("look\nsave", "control characters"),
        ("look\x1b[2J", "control characters"),
        ("take caf\u00e9", "non-ASCII"),
        ("\U0001f600", "non-ASCII"),
    ],
)
async def test_bad_commands_are_refused_and_change_nothing(zork, command, message):
    before = zork.current
    with pytest.raises(CommandError, match=message):
        await zork.act(command)
    assert zork.current == before


async def test_the_unsupported_release_reports_score_moves_and_location_from_memory(settings):
    session = await GameSession.open(read_story(ZORK1_R119), settings)
    try:
        assert not session.supported and session.max_score == 350
        for command in ["open mailbox", "take leaflet", "n", "e", "open window", "w"]:
            turn = await session.act(command)
        assert (turn.location, turn.score, turn.moves) == ("Kitchen", 10, 6)
        assert turn.text.startswith("Kitchen\nYou are in the kitchen")  # no echoed prompt or status line
        assert "Score:" not in turn.text
        turn = await session.act("take all")
        assert turn.score == 10 and turn.moves == 7
        assert (await session.undo(1)).moves == 6
    finally:
        await session.aclose()


async def test_a_killed_interpreter_is_replaced_at_the_last_good_turn(zork):
    for command in ["open mailbox", "take leaflet", "n"]:
        await zork.act(command)
    os.kill(zork._worker._process.pid, signal.SIGKILL)
    with pytest.raises(InterpreterCrashedError, match=r"died.*put back to turn 3") as caught:
        await zork.act("e")
    assert caught.value.exit_code not in (None, 0)  # -9, or 255 where asyncio could not collect the status
    turn = await zork.act("e")
    assert (turn.location, turn.number, turn.moves) == ("Behind House", 4, 4)
    assert "leaflet" in (await zork.peek("inventory")).text


async def test_an_interpreter_that_died_between_calls_is_replaced_at_the_last_good_turn(zork):
    for command in ["open mailbox", "take leaflet", "n"]:
        await zork.act(command)
    process = zork._worker._process
    os.kill(process.pid, signal.SIGKILL)
    with anyio.fail_after(10):
        await process.wait()  # its death is known before the next call
    with pytest.raises(
        InterpreterCrashedError, match=r"died since the last call.*put back to turn 3: 'step' was never sent"
    ):
        await zork.act("e")
    turn = await zork.act("e")
    assert (turn.location, turn.number, turn.moves) == ("Behind House", 4, 4)
    assert "leaflet" in (await zork.peek("inventory")).text
    assert (await zork.undo(1)).number == 3 and await zork.valid_actions()


async def test_a_session_whose_journal_cannot_be_made_is_a_clear_error_and_leaves_no_interpreter(settings, monkeypatch):
    settings.sessions_dir.parent.mkdir(parents=True, exist_ok=True)
    settings.sessions_dir.write_text("a file where the journals' folder should be")
    started = []
    start = WorkerProcess.start

    async def spied(self):
        await start(self)
        started.append(self._process)

    monkeypatch.setattr(WorkerProcess, "start", spied)
    for _ in range(2):
        with pytest.raises(
            GameError, match=rf"journal could not be made in {re.escape(str(settings.sessions_dir))}: a file"
        ):
            await GameSession.open(read_story(ZORK1), settings)
    assert len(started) == 2 and all(p.returncode is not None for p in started)


CALLER = """
import anyio, sys
from frobozz.games import GameSession, GamesSettings, read_story

async def main():
    session = await GameSession.open(read_story(sys.argv[1]), GamesSettings())
    await session.act("open mailbox")
    print(session._worker._scratch.path, flush=True)
    await anyio.sleep(120)

anyio.run(main)
"""


async def test_the_interpreters_folder_left_by_a_caller_killed_with_sigkill_goes_when_the_next_game_opens(settings):
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(ZORK1)], stdout=subprocess.PIPE, text=True)
    with caller:
        left = Path(caller.stdout.readline().strip())
        assert left.name.startswith("frobozz-game-") and left.is_dir()
        caller.kill()  # (from now on any game that opens, in any test worker, may take its folder)
    session = await GameSession.open(read_story(ZORK1), settings)
    try:
        assert not left.exists()
        assert session._worker._scratch.path.is_dir()
    finally:
        await session.aclose()
    assert not session._worker._scratch.path.exists()


async def test_a_story_with_junk_code_fails_cleanly_without_harming_the_caller(settings, tmp_path, monkeypatch):
    here = tmp_path / "callers-folder"
    here.mkdir()
    monkeypatch.chdir(here)  # the junk reaches SAVE, which wrote junk.qzl where the interpreter ran
    story = read_story(garbage_code_story(tmp_path / "junk.z3"))
    try:
        session = await GameSession.open(story, settings)
    except GameError as e:
        assert "junk.z3 could not be started" in str(e)
    else:  # if the junk happens to run, whatever it does stays in its own process
        try:
            with pytest.raises(GameError):
                for _ in range(5):
                    await session.act("look")
        finally:
            await session.aclose()
    healthy = await GameSession.open(read_story(ZORK1), settings)
    assert healthy.current.location == "West of House"
    assert list(here.iterdir()) == []  # nothing written in the caller's folder
    await healthy.aclose()


async def test_an_interpreter_that_never_answers_times_out(settings, tmp_path):
    settings = settings.model_copy(update={"step_timeout": 1.0})
    story = read_story(endless_loop_story(tmp_path / "loop.z3"))
    with anyio.fail_after(30):
        with pytest.raises(InterpreterCrashedError, match="did not answer within 1 s"):
            await GameSession.open(story, settings)


async def test_a_closed_session_refuses_further_play(zork):
    await zork.aclose()
    with pytest.raises(GameSessionClosedError):
        await zork.act("look")
    await zork.aclose()  # closing twice is harmless


async def test_the_journal_replays_to_the_same_turns_and_map(settings, zork):
    for command in ["n", "e", "open window", "w", "e"]:
        await zork.act(command)
    await zork.undo(1)
    await zork.act("u")
    _, turns = replay_journal(settings.sessions_dir / f"{zork.id}.jsonl")
    assert tuple(turns) == zork.turns
    game_map = zork.map()
    assert game_map.rooms == ("West of House", "North of House", "Behind House", "Kitchen", "Attic")
    assert game_map.passages[-1].command == "u"


async def test_valid_actions_work_offline(zork):
    assert set(await zork.valid_actions()) >= {"north", "open mailbox"}


async def test_several_sessions_play_at_once_without_mixing(settings):
    library = GameLibrary(settings)
    sessions = [await GameSession.open(library.find("zork1"), settings) for _ in range(3)]
    try:
        async with anyio.create_task_group() as tg:
            for i, session in enumerate(sessions):

                async def play(s=session, n=i + 1):
                    for _ in range(n):
                        await s.act("n")
                        await s.act("s")

                tg.start_soon(play)
        assert [s.current.moves for s in sessions] == [2, 4, 6]
    finally:
        for s in sessions:
            await s.aclose()


async def test_a_save_that_cannot_be_written_is_a_clear_error_and_leaves_no_file(settings, zork):
    await zork.act("n")
    slot_dir = settings.saves_dir / zork.story.md5
    (slot_dir / "blocked.json").mkdir(parents=True)  # the final rename onto it fails, as a full disk would
    with pytest.raises(SaveError, match="could not be written"):
        await zork.save("blocked")
    assert [p.name for p in slot_dir.iterdir()] == ["blocked.json"]  # no temporary file left behind
    assert (await zork.save("fine")).slot == "fine"


@pytest.mark.parametrize(
    "content",
    [
        b'{"event": "turn", "turn": {"nope": 1}}\n',
        b'{"event": "undo", "steps": "x"}\n',
        b'{"event": "restore", "turns": [1, 2]}\n',
    ],
    ids=["a turn of other fields", "an undo of no number", "a restore of no turns"],
)
def test_a_damaged_journal_is_a_game_error_that_names_it(tmp_path, content):
    """`games map` on such a file ended in a traceback; the game server reads journals too."""
    path = tmp_path / "0123abcd.jsonl"
    path.write_bytes(content)
    with pytest.raises(GameError, match=re.escape(str(path))) as damaged:
        replay_journal(path)
    assert "Error(" not in str(damaged.value)  # no internal exception's text


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage\n", b"{}\n", b"[1, 2]\n", b"5\n", b'{"event": "other"}\n', b"\xff\xfe\n"],
    ids=["empty", "not JSON", "an empty object", "a list", "a number", "no journal's event", "not UTF-8"],
)
def test_a_file_with_no_journal_record_is_said_to_be_no_game_session_journal(tmp_path, content):
    """`games map` drew "0 rooms, 0 passages" for these, or quoted an AttributeError for a list."""
    path = tmp_path / "0123abcd.jsonl"
    path.write_bytes(content)
    with pytest.raises(GameError, match=f"^{re.escape(str(path))} is not a game session journal: "):
        replay_journal(path)
