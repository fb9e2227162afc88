"""The game's part of a context window's orientation (pure: the run gathers the view, this writes it):
the instructions, where the player is, what it carries, the explored map with the exits not yet
taken, and the score so far in brief."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from frobozz.games import GameMap, Turn
from frobozz.loop import Section

from ._store import TurnRecord

MAX_SCORE_STEPS = 12  # the latest score changes shown


@dataclass(frozen=True)
class GameView:
    instructions: str
    header: str  # the status line
    text: str  # the game's latest answer (the room, on a run's first window)
    location: str | None
    inventory: str | None  # None: not known without spending a move (the player can ask the game)
    records: Sequence[TurnRecord] = ()
    opening: Turn | None = None  # where the game began (the map starts there)
    session_id: str | None = None  # tools mode: the game server's session, which every game call names


def score_history(records: Sequence[TurnRecord]) -> str:
    """Where the score changed: `+10 at turn 12 (Kitchen: take egg)`, the latest few."""
    changes, last = [], 0
    for record in records:
        if record.score is not None and record.score != last:
            changes.append(f"{record.score - last:+d} at turn {record.turn} ({record.location}: {record.command})")
            last = record.score
    if not changes:
        return f"No points yet in {len(records)} turns." if records else "The game has not started yet."
    shown = changes[-MAX_SCORE_STEPS:]
    earlier = f"{len(changes) - len(shown)} earlier changes, then " if len(changes) > len(shown) else ""
    return f"Score {last} after {len(records)} turns: {earlier}" + "; ".join(shown) + "."


def game_sections(view: GameView) -> list[Section]:
    where = f"{view.header}\n\n{view.text}"
    if view.session_id:
        where += f"\n\nYour game is session_id {view.session_id} of the game tools: go on with it (no new_game)."
    sections = [Section("The game", view.instructions), Section("Where you are", where)]
    sections.append(
        Section(
            "Inventory",
            view.inventory if view.inventory is not None else "Not known here: ask the game (inventory costs no move).",
        )
    )
    if view.records:
        start = [view.opening] if view.opening else []
        sections.append(Section("Explored map", GameMap.from_turns([*start, *view.records]).to_compact()))
    sections.append(Section("Score so far", score_history(view.records)))
    return sections
