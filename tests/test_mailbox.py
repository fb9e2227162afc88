"""The mailbox between the runner and its game server: each note delivered once, pauses that lift."""

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
