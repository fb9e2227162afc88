"""Named save slots on disk: one JSON file per slot, written atomically, per story file."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frobozz._files import atomic_write

from ._turns import Turn
from .exceptions import SaveError

_SLOT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_FORMAT = 1


@dataclass(frozen=True)
class SaveInfo:
    slot: str
    saved_at: str
    turn: int
    score: int | None
    moves: int | None
    location: str | None


@dataclass(frozen=True)
class SaveRecord:
    info: SaveInfo
    turns: tuple[Turn, ...]
    state: tuple


def check_slot(slot: str) -> str:
    if not isinstance(slot, str) or not _SLOT.fullmatch(slot):
        raise SaveError(
            f"invalid save slot {slot[:80]!r}: use 1-64 letters, digits, '-' or '_', starting with a letter or digit"
        )
    return slot


def encode_state(state: tuple) -> dict[str, Any]:
    """The interpreter's state as plain JSON (base64 for the memory), never pickle."""
    ram, stack, pc, sp, fp, frame_count, opcode, rng, narrative = state

    def b64(b: Any) -> str:
        return base64.b64encode(bytes(b)).decode("ascii")

    return {
        "ram": b64(ram),
        "stack": b64(stack),
        "pc": int(pc),
        "sp": int(sp),
        "fp": int(fp),
        "frame_count": int(frame_count),
        "opcode": int(opcode),
        "rng": [int(x) for x in rng],
        "narrative": b64(narrative),
    }


def decode_state(d: dict[str, Any]) -> tuple:
    import numpy as np  # jericho's state type; imported here so listing games stays quick

    def raw(k: str) -> bytes:
        return base64.b64decode(d[k], validate=True)

    def array(k: str) -> Any:
        return np.frombuffer(raw(k), dtype=np.uint8).copy()

    ints = [int(d[k]) for k in ("pc", "sp", "fp", "frame_count", "opcode")]
    pc, sp, fp, frame_count, opcode = ints
    return (
        array("ram"),
        array("stack"),
        pc,
        sp,
        fp,
        frame_count,
        opcode,
        tuple(int(x) for x in d["rng"]),
        raw("narrative"),
    )


class SaveStore:
    """The save slots of one story file (keyed by its md5, so a save never meets another game)."""

    def __init__(self, root: Path, story_md5: str) -> None:
        self.story_md5 = story_md5
        self.dir = root / story_md5

    def _path(self, slot: str) -> Path:
        return self.dir / f"{check_slot(slot)}.json"

    def write(self, slot: str, turns: list[Turn], state: tuple) -> SaveInfo:
        last = turns[-1]
        info = SaveInfo(
            slot=check_slot(slot),
            saved_at=datetime.now(UTC).isoformat(timespec="seconds"),
            turn=last.number,
            score=last.score,
            moves=last.moves,
            location=last.location,
        )
        doc = {
            "format": _FORMAT,
            "story_md5": self.story_md5,
            "info": asdict(info),
            "turns": [asdict(t) for t in turns],
            "state": encode_state(state),
        }
        try:
            atomic_write(self._path(slot), json.dumps(doc).encode("utf-8"))
        except OSError as e:
            raise SaveError(f"save slot {slot!r} could not be written: {e.strerror or e}") from e
        return info

    def read(self, slot: str) -> SaveRecord:
        path = self._path(slot)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            known = ", ".join(s.slot for s in self.list()) or "none yet"
            raise SaveError(f"no save slot {slot!r} for this game (saved slots: {known})") from None
        except (OSError, ValueError) as e:
            raise SaveError(f"save slot {slot!r} cannot be read: {e}") from e
        try:
            if doc["format"] != _FORMAT or doc["story_md5"] != self.story_md5:
                raise SaveError(f"save slot {slot!r} belongs to another story file or format")
            return SaveRecord(
                info=SaveInfo(**doc["info"]),
                turns=tuple(Turn(**t) for t in doc["turns"]),
                state=decode_state(doc["state"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise SaveError(f"save slot {slot!r} is corrupt ({type(e).__name__}: {e})") from e

    def list(self) -> list[SaveInfo]:
        infos = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                infos.append(SaveInfo(**json.loads(path.read_text(encoding="utf-8"))["info"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a damaged slot is reported when someone restores it
        return infos
