"""Notes one process leaves for another on the same machine: the runner for the game server that claude
started for it (a leaf module that imports nothing of Frobozz). In tools mode a turn is many game tool
calls, so what the runner has to say mid-turn (the ask to hand off, the orientation after claude's own
compaction) goes with the next game answer. Each note is a file, taken exactly once by whichever side
claims it first (a rename); a pause refuses the game's moves until the runner lifts it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ._files import atomic_write

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
