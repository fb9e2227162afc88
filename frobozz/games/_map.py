"""The explored map: rooms in the order first seen, and the commands that led between them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

MapFormat = Literal["text", "dot", "mermaid"]
DIRECTIONS = {
    "n": "north",
    "s": "south",
    "e": "east",
    "w": "west",
    "ne": "northeast",
    "nw": "northwest",
    "se": "southeast",
    "sw": "southwest",
    "u": "up",
    "d": "down",
}
_SHORT = {long: short for short, long in DIRECTIONS.items()}
_COMPASS = re.compile(r"\b(north|south|east|west)(east|west)?\b", re.IGNORECASE)
_UP_DOWN = re.compile(
    r"\b(?:leads?|leading|goes|going|stairs|staircase|stairway|ladder|chimney|passage|path|climb)"
    r"\s+(?:\w+\s+){0,2}?(up|down)(?:ward)?s?\b",
    re.IGNORECASE,
)


class Step(Protocol):  # read-only: a frozen Turn or TurnRecord is one
    @property
    def command(self) -> str | None: ...
    @property
    def location(self) -> str | None: ...
    @property
    def text(self) -> str: ...


def direction(command: str | None) -> str | None:
    """The short compass name of a moving command (`north`, `go n`, `walk down`), else None."""
    words = (command or "").lower().split()
    if words[:1] in (["go"], ["walk"], ["run"]) and len(words) == 2:
        words = words[1:]
    if len(words) != 1:
        return None
    word = words[0]
    return word if word in DIRECTIONS else _SHORT.get(word)


def mentioned_exits(text: str) -> tuple[str, ...]:
    """The directions a room's description names as ways out, short names in compass order."""
    found = {_SHORT[m.group(0).lower()] for m in _COMPASS.finditer(text)}
    found |= {_SHORT[m.group(1).lower()] for m in _UP_DOWN.finditer(text)}
    return tuple(d for d in DIRECTIONS if d in found)


@dataclass(frozen=True)
class Passage:
    source: str
    command: str
    target: str


@dataclass(frozen=True)
class GameMap:
    rooms: tuple[str, ...]
    passages: tuple[Passage, ...]
    exits: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (room, the directions its description names)

    @classmethod
    def from_path(cls, steps: Iterable[tuple[str | None, str | None]]) -> GameMap:
        """Build from (command, location) pairs in play order; the first pair is the start."""
        rooms: dict[str, None] = {}
        passages: dict[Passage, None] = {}
        here: str | None = None
        for command, location in steps:
            if location:
                rooms.setdefault(location)
                if here and command and location != here:
                    passages.setdefault(Passage(here, command, location))
                here = location
        return cls(tuple(rooms), tuple(passages))

    @classmethod
    def from_turns(cls, turns: Iterable[Step]) -> GameMap:
        """`from_path`, and the exits each room's description names (read where the room was entered)."""
        turns = list(turns)
        explored = cls.from_path((t.command, t.location) for t in turns)
        exits: dict[str, set[str]] = {}
        here = None
        for turn in turns:
            if turn.location and (turn.location != here or turn.command in ("look", "l")):
                exits.setdefault(turn.location, set()).update(mentioned_exits(turn.text))
            here = turn.location or here
        return cls(
            explored.rooms,
            explored.passages,
            tuple((room, tuple(d for d in DIRECTIONS if d in found)) for room, found in exits.items()),
        )

    def to_compact(self, *, max_rooms: int = 80) -> str:
        """One line per room: the exits taken and where they led, then the named exits not yet taken
        (most recently reached rooms last; the oldest are left out past `max_rooms`)."""
        named = dict(self.exits)
        lines = []
        for room in self.rooms[-max_rooms:]:
            taken = [p for p in self.passages if p.source == room]
            ways = ", ".join(f"{direction(p.command) or p.command} → {p.target}" for p in taken)
            untried = [d for d in named.get(room, ()) if d not in {direction(p.command) for p in taken}]
            line = f"- {room}: {ways or 'no exit taken yet'}"
            lines.append(line + (f" · unexplored: {', '.join(untried)}" if untried else ""))
        left_out = len(self.rooms) - len(lines)
        head = f"{len(self.rooms)} rooms" + (f" ({left_out} seen longest ago not listed)" if left_out else "")
        return "\n".join([head, *lines])

    def render(self, fmt: MapFormat = "text") -> str:
        return {"text": self.to_text, "dot": self.to_dot, "mermaid": self.to_mermaid}[fmt]()

    def to_text(self) -> str:
        lines = [f"{len(self.rooms)} rooms, {len(self.passages)} passages"]
        for room in self.rooms:
            lines.append(room)
            lines += [f"  {p.command} -> {p.target}" for p in self.passages if p.source == room]
        return "\n".join(lines)

    def to_dot(self) -> str:
        ids = {room: f"r{i}" for i, room in enumerate(self.rooms)}
        lines = ["digraph map {", "  node [shape=box];"]
        lines += [f"  {ids[room]} [label={json.dumps(room)}];" for room in self.rooms]
        lines += [f"  {ids[p.source]} -> {ids[p.target]} [label={json.dumps(p.command)}];" for p in self.passages]
        return "\n".join([*lines, "}"])

    def to_mermaid(self) -> str:
        ids = {room: f"r{i}" for i, room in enumerate(self.rooms)}
        lines = ["flowchart LR"]
        lines += [f'  {ids[room]}["{_mermaid_text(room)}"]' for room in self.rooms]
        lines += [f'  {ids[p.source]} -->|"{_mermaid_text(p.command)}"| {ids[p.target]}' for p in self.passages]
        return "\n".join(lines)


def _mermaid_text(text: str) -> str:
    """Mermaid labels take HTML entities; quotes and brackets would end the label early."""
    return "".join(f"#{ord(c)};" if c in '"<>|[]{}#' else c for c in text)
