"""What the runner says to the player: the opening instructions (a template the user can replace
with --prompt-file), the status header on every game message, and the short corrections."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from frobozz.games import Turn

TEXT_INSTRUCTIONS = """You are playing $title, a text adventure, in a terminal.
Each of my messages is the game's answer, under a status line in [brackets].
Reply with the next command for the game inside tags, like <command>open mailbox</command>.
Think as much as you like first; only what is inside the tag is typed.$multi
Saving, restoring and restarting are handled by the runner (type save or restore as usual);
quitting is not available. Aim for the highest score: $max_score points.
"""

TOOL_INSTRUCTIONS = """You are playing $title, a text adventure, through the game tools.
Start it with new_game (game: "$game"), then send one command at a time with act, using the
session_id that new_game gives you. look and inventory cost no move. Keep playing until you win,
the game ends, or I tell you to stop. Aim for the highest score: $max_score points.
"""

# How every refusal of a game call begins (the run paused for a new window, or ended): the call was not made, so it is
# not a failure, and a player knows to end its turn
PAUSED = "The run pauses here"
MULTI = "\nYou may give several commands, each in its own tag: they run in order."

_TURN = re.compile(r"\bturn (\d+) of (\d+|no limit)\]")


def load_template(prompt_file: Path | None, *, tools: bool) -> Template:
    """The instructions' template: the prompt file given, else the built-in one for text or tools mode."""
    if prompt_file is None:
        return Template(TOOL_INSTRUCTIONS if tools else TEXT_INSTRUCTIONS)
    return Template(prompt_file.read_text(encoding="utf-8"))


def instructions(template: Template, *, title: str, game: str, max_score: int | None, multi: bool) -> str:
    return template.safe_substitute(
        title=title, game=game, max_score=max_score or "unknown", multi=MULTI if multi else ""
    )


def status_header(title: str, turn: Turn, max_score: int | None, number: int, budget: int | None) -> str:
    score = f"{turn.score}/{max_score}" if max_score else f"{turn.score}"
    limit = budget if budget is not None else "no limit"
    return f"[{title} · score {score} · moves {turn.moves} · {turn.location or 'somewhere'} · turn {number} of {limit}]"


def game_message(header: str, text: str) -> str:
    return f"{header}\n\n{text}"


def turn_in(message: str) -> int | None:
    """The turn number in a status header (how a scripted player knows where it is)."""
    match = _TURN.search(message)
    return int(match.group(1)) if match else None


def correction(header: str, problem: str) -> str:
    return f"{header}\n\n({problem} Reply with one command for the game inside tags, like <command>look</command>.)"
