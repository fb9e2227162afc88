"""The explored map laid out for the page: rooms placed by the compass (north up, east right) as far as
the game's geometry allows, then pulled apart by networkx's force-directed layout so that no two rooms
overlap and rooms reached by `enter window` or a maze still land near where they were entered."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from functools import lru_cache

from frobozz.games import GameMap, direction

# compass direction -> (dx, dy) in grid units, y downwards as on screen; up/down drawn as diagonals
_STEP = {"n": (0, -1), "s": (0, 1), "e": (1, 0), "w": (-1, 0), "ne": (1, -1), "nw": (-1, -1), "se": (1, 1),
         "sw": (-1, 1), "u": (0.5, -1), "d": (-0.5, 1)}
_OTHER = (0.7, 0.7)  # a passage that is no compass direction: `enter window`, `climb tree`
CELL_W, CELL_H = 125, 56  # pixels per grid unit
BOX_W, BOX_H = 112, 28


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
    spread = _spread(explored, _compass_grid(explored))
    place = _apart({room: (x * CELL_W, y * CELL_H) for room, (x, y) in spread.items()})
    margin_x, margin_y = BOX_W / 2 + 10, BOX_H / 2 + 10
    left = min(x for x, _ in place.values()) - margin_x
    top = min(y for _, y in place.values()) - margin_y
    place = {room: (x - left, y - top) for room, (x, y) in place.items()}
    rooms = tuple(Room(name, *place[name], current=False, lines=_wrap(name)) for name in explored.rooms)
    links: dict[frozenset[str], Link] = {}
    for p in explored.passages:
        if p.source == p.target or frozenset((p.source, p.target)) in links:
            continue
        (x1, y1), (x2, y2) = place[p.source], place[p.target]
        links[frozenset((p.source, p.target))] = Link(x1, y1, x2, y2, f"{p.source}: {p.command} → {p.target}")
    width = max(x for x, _ in place.values()) + margin_x
    height = max(y for _, y in place.values()) + margin_y
    return MapLayout(rooms, tuple(links.values()), width, height)


def _compass_grid(explored: GameMap) -> dict[str, tuple[float, float]]:
    """Breadth-first from the first room: each newly reached room one step from where it was entered, in the
    direction taken. Rooms of a second, unconnected piece (a teleport) start beside the first."""
    steps: dict[str, list[tuple[str, tuple[float, float]]]] = {room: [] for room in explored.rooms}
    for p in explored.passages:
        dx, dy = _STEP.get(direction(p.command) or "", _OTHER)
        steps[p.source].append((p.target, (dx, dy)))
        steps[p.target].append((p.source, (-dx, -dy)))
    grid: dict[str, tuple[float, float]] = {}
    for start in explored.rooms:
        if start in grid:
            continue
        grid[start] = (max((x for x, _ in grid.values()), default=-2) + 2, 0.0)
        queue = deque([start])
        while queue:
            here = queue.popleft()
            hx, hy = grid[here]
            for there, (dx, dy) in steps[here]:
                if there not in grid:
                    grid[there] = (hx + dx, hy + dy)
                    queue.append(there)
    return grid


def _spread(explored: GameMap, grid: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """networkx's force-directed layout started from the compass grid: rooms keep roughly their compass
    places, and those that share one (the game's geometry is not a plane: mazes, the cellar under the
    house) are pushed apart."""
    import networkx as nx

    if len(set(grid.values())) == len(grid):
        return grid
    graph = nx.Graph()
    graph.add_nodes_from(explored.rooms)
    graph.add_edges_from((p.source, p.target) for p in explored.passages if p.source != p.target)
    spread = nx.spring_layout(graph, pos=grid, k=0.6, iterations=50, seed=1, scale=None)
    return {room: (float(x), float(y)) for room, (x, y) in spread.items()}


def _apart(place: dict[str, tuple[float, float]], rounds: int = 40) -> dict[str, tuple[float, float]]:
    """Boxes that still overlap after the layout, each pair pushed apart along the axis where they overlap
    least, until none do (or `rounds` passes)."""
    pos = {room: list(xy) for room, xy in place.items()}
    rooms = list(pos)
    for _ in range(rounds):
        moved = False
        for i, a in enumerate(rooms):
            for b in rooms[i + 1:]:
                (ax, ay), (bx, by) = pos[a], pos[b]
                over_x, over_y = BOX_W + 8 - abs(ax - bx), BOX_H + 8 - abs(ay - by)
                if over_x <= 0 or over_y <= 0:
                    continue
                moved = True
                if over_x / BOX_W < over_y / BOX_H:
                    shift = over_x / 2 * (1 if ax >= bx else -1)
                    pos[a][0], pos[b][0] = ax + shift, bx - shift
                else:
                    shift = over_y / 2 * (1 if ay >= by else -1)
                    pos[a][1], pos[b][1] = ay + shift, by - shift
        if not moved:
            break
    return {room: (x, y) for room, (x, y) in pos.items()}


def _wrap(name: str, width: int = 20) -> tuple[str, ...]:
    """A room's name in at most two lines that fit its box."""
    words, lines, line = name.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    if len(lines) > 2:
        lines = [lines[0], " ".join(lines[1:])[:width - 1] + "…"]
    return tuple(lines)
