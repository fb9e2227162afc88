"""One turn of play, as every part that shows or stores the game sees it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Turn:
    """The game after a command (turn 0: after the opening). `command` is None for the opening."""

    number: int
    command: str | None
    text: str
    score: int | None
    moves: int | None
    location: str | None
    done: bool = False
    won: bool = False
