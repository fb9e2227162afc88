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
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")
        except OSError as e:
            reason = (
                "a file is in the way of a folder"
                if isinstance(e, FileExistsError | NotADirectoryError)
                else e.strerror or str(e)
            )
            where = f" ({e.filename})" if e.filename and str(e.filename) != str(path.parent) else ""
            raise GameError(f"the game session's journal could not be made in {path.parent}: {reason}{where}") from e

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


_EVENTS = ("start", "turn", "undo", "restore", "restart", "resume", "end")


def replay(path: Path) -> tuple[dict[str, Any], list[Turn]]:
    """The session's start record and its turns as they stand after every undo, restore and restart.

    A file with no journal record in it (empty, or of other JSON or none) is no game session's journal."""
    if not path.is_file():
        raise GameNotFoundError(f"no game session journal at {path}")
    start: dict[str, Any] = {}
    turns: list[Turn] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise GameError(f"{path} is not a game session journal: it is not UTF-8 text") from e
    except OSError as e:
        raise GameError(f"the game session journal at {path} cannot be read: {e.strerror or e}") from e
    records = 0
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if not isinstance(record, dict) or record.get("event") not in _EVENTS:
            continue  # no journal's line: said below when no line is one
        records += 1
        event = record["event"]
        try:  # (what a damaged file holds: a traceback before)
            if event == "start":
                start = record
            elif event == "turn":
                turns.append(Turn(**record["turn"]))
            elif event == "undo":
                del turns[len(turns) - int(record["steps"]) :]
            elif event in ("restore", "restart", "resume"):
                turns = [Turn(**t) for t in record["turns"]]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise GameError(
                f"the game session journal at {path} is damaged at line {number}: "
                f"its {event!r} record is not as a game session writes it"
            ) from e
    if not records:
        raise GameError(f"{path} is not a game session journal: no line of it is a journal record")
    return start, turns
