"""The mailbox between the runner and its game server: each note delivered once, pauses that lift, moves
under way that a runner can wait for."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from frobozz._mailbox import MAX_NOTE_CHARS, Mailbox


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
    assert not mailbox.moving()  # no mailbox folder yet
    with mailbox.move() as reason:
        assert reason is None  # not paused: the game makes this move
        mailbox.pause("compacting")
        assert mailbox.moving()  # the runner, having paused, waits for it
        with mailbox.move() as later:
            assert later == "compacting"  # not made
    assert not mailbox.moving() and not list((tmp_path / "box").glob("*.moving"))


def test_the_mark_of_a_game_server_killed_mid_move_does_not_hold_the_runner(tmp_path):
    folder = tmp_path / "box"
    mover = subprocess.Popen(
        [sys.executable, "-c", MID_MOVE, str(folder)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert mover.stdout is not None and mover.stdout.readline() == "moving\n"
        assert Mailbox(folder).moving()
    finally:
        mover.kill()
        mover.wait()
    assert not Mailbox(folder).moving() and not list(folder.glob("*.moving"))  # and its mark is cleared


MID_MOVE = """
import sys, time
from frobozz._mailbox import Mailbox
with Mailbox(sys.argv[1]).move():
    print("moving", flush=True)
    time.sleep(120)
"""
