"""The mailbox between the runner and its game server: each note delivered once, pauses that lift, moves
under way that a runner can wait for."""

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from frobozz._mailbox import MAX_NOTE_CHARS, Mailbox
from tests.waiting import eventually


def test_an_empty_or_missing_mailbox_has_nothing_and_is_not_paused(tmp_path):
    mailbox = Mailbox(tmp_path / "never-made")
    assert mailbox.take() == [] and mailbox.paused() is None
    mailbox.resume()  # nothing to lift: no error


def test_notes_come_out_oldest_first_once_each_and_blank_ones_are_not_kept(tmp_path):
    mailbox = Mailbox(tmp_path / "box")
    for text in ("first", "", "  \n", "second", "x" * (MAX_NOTE_CHARS * 2)):
        mailbox.post(text)
    notes = mailbox.take()
    assert notes[:2] == ["first", "second"] and len(notes[2]) == MAX_NOTE_CHARS and mailbox.take() == []
    assert list((tmp_path / "box").iterdir()) == []


def test_two_takers_at_once_share_the_notes_without_a_note_delivered_twice(tmp_path):
    mailbox = Mailbox(tmp_path / "box")
    for i in range(200):
        mailbox.post(f"note {i}")
    with ThreadPoolExecutor(4) as pool:
        taken = [n for batch in pool.map(lambda _: mailbox.take(), range(8)) for n in batch]
    assert sorted(taken) == sorted(f"note {i}" for i in range(200))


def test_a_pause_says_why_until_it_is_lifted(tmp_path):
    mailbox = Mailbox(tmp_path / "box")
    mailbox.pause("compacting")
    assert mailbox.paused() == "compacting"
    mailbox.resume()
    assert mailbox.paused() is None


def test_a_move_begun_before_the_pause_is_under_way_until_it_ends_and_one_begun_after_is_refused(tmp_path):
    mailbox = Mailbox(tmp_path / "box")
    assert not mailbox.moving() and mailbox.made() == 0  # no mailbox folder yet
    with mailbox.move() as reason:
        assert reason is None  # not paused: the game makes this move
        mailbox.pause("compacting")
        assert mailbox.moving() and mailbox.made() == 0  # the runner, having paused, waits for it
        with mailbox.move() as later:
            assert later == "compacting"  # not made
    assert not mailbox.moving() and mailbox.made() == 1 and not list((tmp_path / "box").glob("*.mov*"))
    mailbox.forget_moves()
    assert mailbox.made() == 0


def test_a_move_is_marked_before_the_pause_is_read_and_one_that_fails_is_not_counted(tmp_path, monkeypatch):
    mailbox = Mailbox(tmp_path / "box")
    read_pause = Mailbox.paused
    marked = []

    def paused(self):
        marked.append(self.moving())
        return read_pause(self)

    monkeypatch.setattr(Mailbox, "paused", paused)
    with pytest.raises(RuntimeError), mailbox.move():
        raise RuntimeError("the game refused the command")
    assert marked == [True] and mailbox.made() == 0 and not mailbox.moving()


@pytest.mark.anyio
async def test_the_runner_waits_for_a_move_under_way_and_then_for_its_answer(tmp_path):
    """The waits that must not end are bounded at 0.3 s: each would end at once with the check it proves gone."""
    mailbox, release = Mailbox(tmp_path / "box"), threading.Event()

    def hold_a_move():
        with mailbox.move():
            release.wait(30)

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, hold_a_move)
        with anyio.fail_after(30):
            await eventually(mailbox.moving)
        with anyio.move_on_after(0.3) as under_way:
            await mailbox.answered(lambda: 1)  # its answer counted as seen already: still under way
        release.set()
    assert under_way.cancelled_caught and mailbox.made() == 1 and not mailbox.moving()
    with anyio.move_on_after(0.3) as unanswered:
        await mailbox.answered(lambda: 0)  # made, and claude's answer to it not seen yet
    assert unanswered.cancelled_caught
    with anyio.fail_after(5):
        await mailbox.answered(lambda: 1)


@pytest.mark.anyio
async def test_the_mark_of_a_game_server_killed_mid_move_does_not_hold_the_runner(tmp_path):
    folder = tmp_path / "box"
    mover = subprocess.Popen([sys.executable, "-c", MID_MOVE, str(folder)], start_new_session=True)
    try:
        with anyio.fail_after(30):
            await eventually(Mailbox(folder).moving)
    finally:
        mover.kill()
        mover.wait()
    assert not Mailbox(folder).moving() and not list(folder.glob("*.moving"))  # and its mark is cleared
    with anyio.fail_after(5):
        await Mailbox(folder).answered(lambda: 0)  # it made no move


MID_MOVE = """
import sys, time
from frobozz._mailbox import Mailbox
with Mailbox(sys.argv[1]).move():
    time.sleep(120)
"""
