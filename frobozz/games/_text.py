"""Clean what the interpreter prints, and recognise the end of a game, for any story file."""

from __future__ import annotations

import re

# An unsupported game's output starts with the echoed prompt and the status line drawn before
# the command ran: "> West of House      Score: 0      Moves: 2".
_ECHO = re.compile(r"\A\s*>\s?")
_STATUS_LINE = re.compile(
    r"\A[^\n]*?\s{2,}(?:Score:\s*-?\d+\s+Moves:\s*\d+|Time:\s*\d+:\d+\s*[ap]?m?)\s*(?:\n|\Z)", re.IGNORECASE
)
_TRAILING_PROMPT = re.compile(r"\n\s*>\s*\Z")
_GAME_OVER = re.compile(r"restart.{0,80}restore.{0,120}(?:quit|end this session)", re.IGNORECASE | re.DOTALL)


def clean_output(text: str) -> str:
    """Strip the echoed prompt, a stale status line and a trailing prompt; keep the story's text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    echo = _ECHO.match(text)
    if echo:
        text = text[echo.end() :]
        status = _STATUS_LINE.match(text)
        if status:
            text = text[status.end() :]
    text = _TRAILING_PROMPT.sub("", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n")).strip()


def looks_like_game_over(text: str) -> bool:
    """True when the game offers to restart, restore or quit: how Infocom and Inform games end."""
    return bool(_GAME_OVER.search(text))


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_SENTENCES = 6  # of a game's answer, searched one by one beside the room's name


def memory_queries(location: str | None, text: str) -> list[str]:
    """What to search long-term memory with after a move: the room's name, then each sentence of the
    game's answer (a note names the room it is about; an answer's sentences name its things)."""
    sentences = [s.strip() for s in _SENTENCE.split(text) if len(s.split()) >= 2][:MAX_SENTENCES]
    return [location, *sentences] if location else sentences
