"""A session's journal on disk: one JSON line per change, so its history and map outlive it."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._turns import Turn
from .exceptions import GameNotFoundError


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
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        event = record.get("event")
        if event == "start":
            start = record
        elif event == "turn":
            turns.append(Turn(**record["turn"]))
        elif event == "undo":
            del turns[len(turns) - int(record["steps"]) :]
        elif event in ("restore", "restart", "resume"):
            turns = [Turn(**t) for t in record["turns"]]
    return start, turns
