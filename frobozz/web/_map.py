"""The explored map laid out for the page: the games part's north-up grid (the same layout as the run's
map.png), in pixels, with each passage's direction written beside the room it leaves and up/down, in/out
drawn apart from the compass passages."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from frobozz.games import GameMap, grid_layout

CELL_W, CELL_H = 150, 80  # pixels per grid cell
BOX_W, BOX_H = 120, 40


@dataclass(frozen=True)
class Room:
    name: str
    x: float  # the box's centre, in pixels
    y: float
    current: bool
    lines: tuple[str, ...]  # the name, wrapped to fit the box


@dataclass(frozen=True)
class Link:
    x1: float
    y1: float
    x2: float
    y2: float
    label: str  # the command (shown on hover)
    kind: str  # compass, vertical (up/down) or inout (in, out, enter window, climb tree): drawn apart
    way: str  # the direction written beside the room it leaves: `n`, `up`, `enter window`
    way_x: float
    way_y: float


@dataclass(frozen=True)
class MapLayout:
    rooms: tuple[Room, ...]
    links: tuple[Link, ...]
    width: float
    height: float
    box_w: float = BOX_W  # each room's box
    box_h: float = BOX_H

    @property
    def current(self) -> Room | None:
        return next((r for r in self.rooms if r.current), None)


def layout(explored: GameMap, current: str | None) -> MapLayout:
    """Where each room of `explored` goes on the page, and the passages between them (one line for a pair
    of rooms joined both ways), with the `current` room marked. A live page asks after every turn; the
    places are worked out once per map (most turns enter no new room)."""
    placed = _placed(explored)
    return replace(placed, rooms=tuple(replace(r, current=r.name == current) for r in placed.rooms))


@lru_cache(maxsize=64)
def _placed(explored: GameMap) -> MapLayout:
    if not explored.rooms:
        return MapLayout((), (), 0, 0)
    grid = grid_layout(explored)
    margin_x, margin_y = BOX_W / 2 + 12, BOX_H / 2 + 12
    place = {room: (x * CELL_W + margin_x, y * CELL_H + margin_y) for room, (x, y) in grid.places}
    rooms = tuple(Room(name, *place[name], current=False, lines=_wrap(name)) for name in explored.rooms)
    links = []
    for p in grid.passages:
        start, end = place[p.source], place[p.target]
        hover = f"{p.source}: {p.command} → {p.target}" + (" (and back)" if p.both_ways else "")
        if p.stub:  # a line across the map would cross others: a short stub at each end says where it goes
            links += [
                _stub(start, end, f"{p.label} → {p.target}", hover, p.kind.value),
                _stub(end, start, f"from {p.source} ({p.label})", hover, p.kind.value),
            ]
            continue
        wx, wy = _beside_box(*start, *end)
        links.append(Link(*start, *end, hover, p.kind.value, p.label, wx, wy))
    width = grid.width * CELL_W - CELL_W + 2 * margin_x
    height = grid.height * CELL_H - CELL_H + 2 * margin_y
    return MapLayout(rooms, tuple(links), width, height)


def _stub(start: tuple[float, float], end: tuple[float, float], text: str, hover: str, kind: str) -> Link:
    """A short line from the box at `start` towards `end`, with where it leads written beside it."""
    (x1, y1), (x2, y2) = start, end
    length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5 or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    scale = min(BOX_W / 2 / abs(ux) if ux else 1e9, BOX_H / 2 / abs(uy) if uy else 1e9)
    ex, ey = x1 + ux * scale, y1 + uy * scale
    wx, wy = _beside_box(x1, y1, x2, y2)
    return Link(ex, ey, ex + 22 * ux, ey + 22 * uy, hover, kind, text, wx, wy)


def _beside_box(x1: float, y1: float, x2: float, y2: float) -> tuple[float, float]:
    """Where a passage leaves its room's box (its direction is written there)."""
    dx, dy = x2 - x1, y2 - y1
    scale = min(BOX_W / 2 / abs(dx) if dx else 1e9, BOX_H / 2 / abs(dy) if dy else 1e9)
    return x1 + dx * scale + (6 if dx >= 0 else -6), y1 + dy * scale + (11 if dy > 0 else -4)


def _wrap(name: str, width: int = 20) -> tuple[str, ...]:
    """A room's name in at most three lines that fit its box."""
    words, lines, line = name.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    if len(lines) > 3:
        lines = [*lines[:2], " ".join(lines[2:])[: width - 1] + "…"]
    return tuple(lines)
