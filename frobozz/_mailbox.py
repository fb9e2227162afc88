"""Notes one process leaves for another on the same machine: the runner for the game server that claude
started for it (a leaf module: it imports only other leaf modules). In tools mode a turn is many game tool
calls, so what the runner has to say mid-turn (the ask to hand off, the orientation after claude's own
compaction) goes with the next game answer. Each note is a file, taken exactly once by whichever side
claims it first (a rename); a pause refuses the game's moves until the runner lifts it, and a move marks
itself under way before it reads the pause, so that the runner, once it has paused, can wait for the moves
that started before (their answers must reach claude before the runner interrupts it)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio

from ._files import atomic_write, locked_file

MAX_NOTE_CHARS = 60_000
MADE = "made"  # one byte for each move the game made
log = logging.getLogger("frobozz.mailbox")


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
        made) or None (make it within the block: counted as made when the block ends without an error). Marked
        first, so a move that read no pause is seen by a `moving()` that comes after the pause; counted before
        its mark goes, so `moving()` false and `made()` say together what became of it."""
        mark = self._mark()
        made = False
        try:
            reason = self.paused()
            yield reason
            made = reason is None
        finally:
            if mark is not None:
                with contextlib.suppress(OSError):  # the move stands, whatever its bookkeeping meets
                    if made:
                        with open(self.folder / MADE, "ab") as counter:
                            counter.write(b".")  # one byte a move (O_APPEND: moves at once each add theirs)
                    (self.folder / f"{mark[0]}.moving").unlink()
                os.close(mark[1])

    def _mark(self) -> tuple[str, int] | None:
        """A mark file this process holds an flock on (the kernel lets go when it dies), named `.moving` only
        once locked: `moving()` never finds one unlocked but stale. None when the folder cannot be written."""
        name = f"{os.getpid()}-{secrets.token_hex(6)}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            return name, locked_file(self.folder / f"{name}.moving")
        except OSError as e:
            log.warning("game mailbox %s: a move goes on unmarked (%s)", self.folder, e)
            return None

    def moving(self) -> bool:
        """Whether a move is under way: a mark whose lock is held (one left by a process killed mid-move is
        cleared)."""
        try:
            marks = [p for p in self.folder.iterdir() if p.suffix == ".moving"]
        except FileNotFoundError:
            return False
        for mark in marks:
            try:
                fd = os.open(mark, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # its move ended meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            finally:
                os.close(fd)
            mark.unlink(missing_ok=True)
        return False

    def made(self) -> int:
        """How many moves the game has made since `forget_moves()`."""
        try:
            return (self.folder / MADE).stat().st_size
        except FileNotFoundError:
            return 0

    def forget_moves(self) -> None:
        """Count made moves from 0 (a new game server, for a new runner)."""
        (self.folder / MADE).unlink(missing_ok=True)

    async def answered(self, seen: Callable[[], int]) -> None:
        """Until no move is under way and `seen()` (the moves whose answers the runner has seen claude get)
        has reached `made()`. Polled: the game server marks and counts its moves in its own process."""
        while self.moving() or self.made() > seen():  # noqa: ASYNC110 - another process's files: no event
            await anyio.sleep(0.05)
