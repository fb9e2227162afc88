"""Notes one process leaves for another on the same machine: the runner for the game server that claude
started for it (a leaf module: it imports only other leaf modules). In tools mode a turn is many game tool
calls, so what the runner has to say mid-turn (the ask to hand off, the orientation after claude's own
compaction) goes with the next game answer. Each note is a file, taken exactly once by whichever side
claims it first (a rename); a pause refuses the game's moves until the runner lifts it, and a move marks
itself under way before it reads the pause, so that the runner, once it has paused, can wait for the moves
that started before (their answers must reach claude before the runner interrupts it)."""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from ._files import atomic_write
from ._pgguard import is_live

MAX_NOTE_CHARS = 60_000


class Mailbox:
    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)

    def post(self, text: str) -> None:
        """Leave a note for the next game answer."""
        if text.strip():
            atomic_write(self.folder / f"{time.time_ns():020d}-{os.getpid()}.note", text[:MAX_NOTE_CHARS].encode())

    def take(self) -> list[str]:
        """The notes waiting, oldest first, each claimed by this call alone (and gone)."""
        try:
            names = sorted(p.name for p in self.folder.iterdir() if p.suffix == ".note")
        except FileNotFoundError:
            return []
        notes = []
        for name in names:
            claimed = self.folder / f"{name}.{os.getpid()}.taken"
            try:
                os.rename(self.folder / name, claimed)  # atomic: the other side finds it gone
            except FileNotFoundError:
                continue
            try:
                notes.append(claimed.read_text(encoding="utf-8", errors="replace"))
            finally:
                claimed.unlink(missing_ok=True)
        return notes

    def pause(self, reason: str) -> None:
        """Until resume(): the game refuses moves with `reason` (and changes nothing)."""
        atomic_write(self.folder / "paused", reason[:MAX_NOTE_CHARS].encode())

    def resume(self) -> None:
        (self.folder / "paused").unlink(missing_ok=True)

    def paused(self) -> str | None:
        try:
            return (self.folder / "paused").read_text(encoding="utf-8", errors="replace") or "paused"
        except FileNotFoundError:
            return None

    @contextlib.contextmanager
    def move(self) -> Iterator[str | None]:
        """A game move: marked under way, then the pause read. Yields the pause's reason (the move must not be
        made) or None (make it within the block). Marked first, so a move that read no pause is seen by a
        `moving()` that comes after the pause."""
        mark = self.folder / f"{os.getpid()}-{secrets.token_hex(4)}.moving"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            mark.touch()
        except OSError:
            pass  # an unwritable mailbox: the move goes on unmarked
        try:
            yield self.paused()
        finally:
            mark.unlink(missing_ok=True)

    def moving(self) -> bool:
        """Whether a move is under way (the mark of a process that died mid-move is cleared)."""
        try:
            marks = [p for p in self.folder.iterdir() if p.suffix == ".moving"]
        except FileNotFoundError:
            return False
        for mark in marks:
            pid = mark.name.split("-", 1)[0]
            if pid.isdigit() and is_live(int(pid)):
                return True
            mark.unlink(missing_ok=True)
        return False
