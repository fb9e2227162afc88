"""A session's journal on disk: one JSON line per change, so its history and map outlive it."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._turns import Turn
from .exceptions import GameError, GameNotFoundError


class Journal:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> None:
        self._file.write(json.dumps({"event": event, **fields}) + "\n")
        self._file.flush()

    def turn(self, turn: Turn) -> None:
        self.write("turn", turn=asdict(turn))

    def reset(self, event: str, turns: list[Turn], **fields: Any) -> None:
        """Record that the history was replaced wholesale (by a restart or a restore)."""
        self.write(event, turns=[asdict(t) for t in turns], **fields)

    def close(self) -> None:
        self._file.close()


def replay(path: Path) -> tuple[dict[str, Any], list[Turn]]:
    """The session's start record and its turns as they stand after every undo, restore and restart."""
    if not path.is_file():
        raise GameNotFoundError(f"no game session journal at {path}")
    start: dict[str, Any] = {}
    turns: list[Turn] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise GameError(f"the game session journal at {path} cannot be read: {e}") from e
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        try:  # (what a damaged file holds: a traceback before)
            event = record.get("event")
            if event == "start":
                start = record
            elif event == "turn":
                turns.append(Turn(**record["turn"]))
            elif event == "undo":
                del turns[len(turns) - int(record["steps"]) :]
            elif event in ("restore", "restart", "resume"):
                turns = [Turn(**t) for t in record["turns"]]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise GameError(f"the game session journal at {path} is damaged at line {number}: {e!r:.200}") from e
    return start, turns
