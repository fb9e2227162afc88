"""The explored map: rooms in the order first seen, and the commands that led between them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

MapFormat = Literal["text", "dot", "mermaid"]


@dataclass(frozen=True)
class Passage:
    source: str
    command: str
    target: str


@dataclass(frozen=True)
class GameMap:
    rooms: tuple[str, ...]
    passages: tuple[Passage, ...]

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
        return "\n".join(lines + ["}"])

    def to_mermaid(self) -> str:
        ids = {room: f"r{i}" for i, room in enumerate(self.rooms)}
        lines = ["flowchart LR"]
        lines += [f'  {ids[room]}["{_mermaid_text(room)}"]' for room in self.rooms]
        lines += [f'  {ids[p.source]} -->|"{_mermaid_text(p.command)}"| {ids[p.target]}' for p in self.passages]
        return "\n".join(lines)


def _mermaid_text(text: str) -> str:
    """Mermaid labels take HTML entities; quotes and brackets would end the label early."""
    return "".join(f"#{ord(c)};" if c in '"<>|[]{}#' else c for c in text)
