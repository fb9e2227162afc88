"""The explored map on a grid, north up: each room placed from the room it was entered from in the direction
taken (north above, east to the right), where its lines cross nothing; a way up, down, in or out begins a
level of its own beside it (the cellar is not drawn over the house). Rooms are then moved cell by cell while
that removes crossings, lines through rooms or broken compass directions, and a way up, down, in or out whose
line would still cross is drawn as a labelled stub at each end. One layout for the map image a run leaves and
the web page, so both show the same map. No library keeps compass directions (networkx's planar layout, grandalf,
HOLA and OGDF place freely), hence this small one."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

from ._map import GameMap, direction


class PassageKind(Enum):
    """How a passage between rooms is drawn on the map: by compass, up and down, or in and out."""

    COMPASS = "compass"  # n, s, e, w and the diagonals
    VERTICAL = "vertical"  # up, down (stairs, ladders, the chimney)
    INOUT = "inout"  # in, out, enter, exit, a named thing: `enter window`, `climb tree`


# where a step leads on the grid, y downwards (as on a screen and in SVG): north is up
_STEP = {
    "n": (0, -1),
    "s": (0, 1),
    "e": (1, 0),
    "w": (-1, 0),
    "ne": (1, -1),
    "nw": (-1, -1),
    "se": (1, 1),
    "sw": (-1, 1),
    "u": (1, -1),
    "d": (-1, 1),
    "in": (1, 1),
    "out": (-1, -1),
}
_INOUT = {"in": "in", "enter": "in", "inside": "in", "out": "out", "exit": "out", "leave": "out", "outside": "out"}
_PASSES = 3  # improvement rounds over every room (each stops early when nothing moves)


@dataclass(frozen=True)
class PlacedPassage:
    source: str
    target: str
    command: str  # the command that led from source to target
    kind: PassageKind
    label: str  # what the drawing says: `n`, `up`, `in`, `enter window`
    both_ways: bool  # the way back was taken too
    stub: bool = False  # drawn as a short labelled stub at each end, not a line across the map: a passage
    # that is no compass direction (a prayer that moves you, a long way down) and whose line would cross


@dataclass(frozen=True)
class GridLayout:
    places: tuple[tuple[str, tuple[int, int]], ...]  # room -> (column, row), row 0 at the top (north)
    passages: tuple[PlacedPassage, ...]  # one per pair of rooms
    crossings: int  # pairs of passages that cross (0 when one could be found)

    @property
    def width(self) -> int:
        return max((x for _, (x, _) in self.places), default=-1) + 1

    @property
    def height(self) -> int:
        return max((y for _, (_, y) in self.places), default=-1) + 1

    def place(self, room: str) -> tuple[int, int]:
        return dict(self.places)[room]


def kind_of(command: str) -> tuple[PassageKind, str, tuple[int, int] | None]:
    """What sort of passage a command made, its label and its grid step (None: no direction to keep)."""
    short = direction(command)
    if short in ("u", "d"):
        return PassageKind.VERTICAL, "up" if short == "u" else "down", _STEP[short]
    if short:
        return PassageKind.COMPASS, short, _STEP[short]
    words = command.lower().split()
    way = _INOUT.get(words[0]) if words else None
    if way and len(words) <= 3:
        return PassageKind.INOUT, way if len(words) == 1 else command.lower(), _STEP[way]
    if words[:1] in (["climb"], ["go"]) and words[1:2] in (["up"], ["down"]):
        step = _STEP["u" if words[1] == "up" else "d"]
        return PassageKind.VERTICAL, command.lower(), step
    return PassageKind.INOUT, command.lower(), None


def grid_layout(explored: GameMap) -> GridLayout:
    """`explored` laid out north up; the same map gives the same layout (worked out once, cached)."""
    return _grid_layout(explored)


@lru_cache(maxsize=64)
def _grid_layout(explored: GameMap) -> GridLayout:
    passages = _passages(explored)
    if not explored.rooms:
        return GridLayout((), (), 0)
    steps = {(p.source, p.target): kind_of(p.command)[2] for p in passages}
    pos = _first_places(explored.rooms, passages, steps)
    _improve(pos, _drawn(pos, passages), steps)
    drawn = _drawn(pos, passages)
    lines = {id(p) for p in drawn}
    passages = tuple(p if id(p) in lines else replace(p, stub=True) for p in passages)
    left = min(x for x, _ in pos.values())
    top = min(y for _, y in pos.values())
    places = tuple((room, (pos[room][0] - left, pos[room][1] - top)) for room in explored.rooms)
    return GridLayout(places, passages, _count_crossings(pos, drawn))


def _drawn(pos: dict[str, tuple[int, int]], passages: tuple[PlacedPassage, ...]) -> tuple[PlacedPassage, ...]:
    """The passages drawn as lines: every compass one, and of the others (up, down, in, out, a teleport) each,
    shortest first, whose line crosses none already drawn and runs through no room; the rest become stubs."""
    drawn = [p for p in passages if p.kind is PassageKind.COMPASS]
    others = sorted(
        (p for p in passages if p.kind is not PassageKind.COMPASS),
        key=lambda p: abs(pos[p.source][0] - pos[p.target][0]) + abs(pos[p.source][1] - pos[p.target][1]),
    )
    for p in others:
        if not _through(pos, p) and not any(_cross(pos, p, q) for q in drawn):
            drawn.append(p)
    return tuple(drawn)


def _passages(explored: GameMap) -> tuple[PlacedPassage, ...]:
    """One passage per pair of rooms, in the direction first taken."""
    pairs: dict[frozenset[str], PlacedPassage] = {}
    for p in explored.passages:
        if p.source == p.target:
            continue
        key = frozenset((p.source, p.target))
        if key in pairs:
            if pairs[key].source == p.target and not pairs[key].both_ways:
                first = pairs[key]
                pairs[key] = PlacedPassage(first.source, first.target, first.command, first.kind, first.label, True)
            continue
        kind, label, _ = kind_of(p.command)
        pairs[key] = PlacedPassage(p.source, p.target, p.command, kind, label, False)
    return tuple(pairs.values())


def _first_places(
    rooms: tuple[str, ...], passages: tuple[PlacedPassage, ...], steps: dict[tuple[str, str], tuple[int, int] | None]
) -> dict[str, tuple[int, int]]:
    """Breadth-first from the first room: each room reached is put on the first free cell along the step it
    was entered by (one cell away, else two, …); a second, unconnected piece (a teleport) starts to the right."""
    ways: dict[str, list[tuple[str, tuple[int, int] | None, bool]]] = {room: [] for room in rooms}
    for p in passages:
        step = steps[(p.source, p.target)]
        planar = p.kind is PassageKind.COMPASS
        ways[p.source].append((p.target, step, planar))
        ways[p.target].append((p.source, (-step[0], -step[1]) if step else None, planar))
    pos: dict[str, tuple[int, int]] = {}
    taken: set[tuple[int, int]] = set()
    later: deque[tuple[str, str, tuple[int, int]]] = deque()  # rooms reached by up, down, in or out
    starts = deque((room, None, (1, 0)) for room in rooms)
    while later or starts:
        start, origin, step = later.popleft() if later else starts.popleft()
        if start in pos:
            continue
        # a new level (the cellar under the house, up a tree) begins along its step where its rooms fit;
        # a second, unconnected piece (a teleport) beside what is drawn
        if origin is None:
            cell = (max((x for x, _ in pos.values()), default=-2) + 2, 0)
        else:
            cell = _free_cell(start, pos[origin], step, pos, taken, ways)
        pos[start] = cell
        taken.add(cell)
        queue = deque([start])
        while queue:
            here = queue.popleft()
            hx, hy = pos[here]
            for there, step, planar in ways[here]:
                if there in pos:
                    continue
                if not planar or step is None:
                    later.append((there, here, step or (1, 1)))
                    continue
                pos[there] = _free_cell(there, (hx, hy), step, pos, taken, ways)
                taken.add(pos[there])
                queue.append(there)
    return pos


def _free_cell(
    room: str,
    origin: tuple[int, int],
    step: tuple[int, int],
    pos: dict[str, tuple[int, int]],
    taken: set[tuple[int, int]],
    ways: dict[str, list],
) -> tuple[int, int]:
    """The first free cell along `step` from `origin` (nearest first) whose passages to the rooms already
    placed cross none and run through no room; failing that along `step` turned 45° or 90°; failing all,
    the nearest free cell along `step`."""
    placed = [(a, b) for a in pos for b, _, _ in ways[a] if b in pos and a < b]
    links = [there for there, _, _ in ways[room] if there in pos]
    sx, sy = step
    turned = [step, _rotate(step, 1), _rotate(step, -1), _rotate(step, 2), _rotate(step, -2)]
    fallback = None
    for k in range(1, 5):
        for dx, dy in turned:
            cell = (origin[0] + k * dx, origin[1] + k * dy)
            if cell in taken:
                continue
            fallback = fallback or (cell if (dx, dy) == (sx, sy) else None)
            if _clear(cell, links, placed, pos):
                return cell
    k = 1
    while (origin[0] + k * sx, origin[1] + k * sy) in taken:
        k += 1
    return fallback or (origin[0] + k * sx, origin[1] + k * sy)


def _rotate(step: tuple[int, int], eighths: int) -> tuple[int, int]:
    ring = [(0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1)]
    return ring[(ring.index(step) + eighths) % 8]


def _clear(
    cell: tuple[int, int], links: list[str], placed: list[tuple[str, str]], pos: dict[str, tuple[int, int]]
) -> bool:
    """A room at `cell` joined to the rooms `links` crosses no placed passage and runs through no room."""
    trial = {**pos, "\0new": cell}
    for there in links:
        new = PlacedPassage("\0new", there, "", PassageKind.COMPASS, "", False)
        if _through(trial, new):
            return False
        for a, b in placed:
            if _cross(trial, new, PlacedPassage(a, b, "", PassageKind.COMPASS, "", False)):
                return False
    return not any(_on_segment(cell, trial, PlacedPassage(a, b, "", PassageKind.COMPASS, "", False)) for a, b in placed)


def _improve(
    pos: dict[str, tuple[int, int]],
    passages: tuple[PlacedPassage, ...],
    steps: dict[tuple[str, str], tuple[int, int] | None],
) -> None:
    """Move one room at a time to a free cell nearby (or further along one of its passages' directions)
    when that lowers the cost: crossings and passages through rooms first, then broken compass
    directions, then length. Only the moved room's passages are re-checked."""
    touching: dict[str, list[PlacedPassage]] = {room: [] for room in pos}
    for p in passages:
        touching[p.source].append(p)
        touching[p.target].append(p)
    for _ in range(_PASSES):
        moved = False
        for room in _troubled(pos, passages, steps):
            here = pos[room]
            best_cell, best_cost = here, _room_cost(room, pos, touching, passages, steps)
            occupied = set(pos.values())
            for cell in _candidates(room, pos, touching, steps):
                if cell in occupied:
                    continue
                pos[room] = cell
                cost = _room_cost(room, pos, touching, passages, steps)
                if cost < best_cost:
                    best_cell, best_cost = cell, cost
            pos[room] = best_cell
            moved |= best_cell != here
        if not moved:
            break


def _troubled(
    pos: dict[str, tuple[int, int]],
    passages: tuple[PlacedPassage, ...],
    steps: dict[tuple[str, str], tuple[int, int] | None],
) -> list[str]:
    """The rooms worth moving: the ends of passages that cross, run through a room or break their
    direction, and the rooms run through (most rooms of a walk have none of these, and stay put)."""
    found: dict[str, None] = {}
    for i, a in enumerate(passages):
        bad = not _keeps_direction(pos, a, steps[(a.source, a.target)])
        for b in passages[i + 1 :]:
            if _cross(pos, a, b):
                bad = True
                found.update({b.source: None, b.target: None})
        for room, cell in pos.items():
            if room not in (a.source, a.target) and _on_segment(cell, pos, a):
                bad = True
                found[room] = None
        if bad:
            found.update({a.source: None, a.target: None})
    return list(found)


def _candidates(
    room: str,
    pos: dict[str, tuple[int, int]],
    touching: dict[str, list[PlacedPassage]],
    steps: dict[tuple[str, str], tuple[int, int] | None],
) -> list[tuple[int, int]]:
    x, y = pos[room]
    cells = [(x + dx, y + dy) for dx in range(-2, 3) for dy in range(-2, 3) if dx or dy]
    for p in touching[room]:  # further out along the direction the room is from each neighbour
        step = steps[(p.source, p.target)]
        if step is None:
            continue
        other, sign = (p.source, 1) if p.target == room else (p.target, -1)
        ox, oy = pos[other]
        cells += [(ox + sign * k * step[0], oy + sign * k * step[1]) for k in range(1, 4)]
    return cells


def _room_cost(
    room: str,
    pos: dict[str, tuple[int, int]],
    touching: dict[str, list[PlacedPassage]],
    passages: tuple[PlacedPassage, ...],
    steps: dict[tuple[str, str], tuple[int, int] | None],
) -> tuple:
    mine = touching[room]
    ids = {id(p) for p in mine}
    crossings = sum(1 for a in mine for b in passages if id(b) not in ids and _cross(pos, a, b))
    crossings += sum(1 for i, a in enumerate(mine) for b in mine[i + 1 :] if _cross(pos, a, b))
    through = sum(_through(pos, p) for p in passages if id(p) in ids or _on_segment(pos[room], pos, p))
    broken = sum(1 for p in mine if not _keeps_direction(pos, p, steps[(p.source, p.target)]))
    length = sum(max(abs(pos[p.source][0] - pos[p.target][0]), abs(pos[p.source][1] - pos[p.target][1])) for p in mine)
    return (crossings + through, broken, length)


def _keeps_direction(pos: dict[str, tuple[int, int]], p: PlacedPassage, step: tuple[int, int] | None) -> bool:
    """The target lies the way the command went (north: above, not merely less far below)."""
    if step is None:
        return True
    (sx, sy), (tx, ty) = pos[p.source], pos[p.target]
    return (_sign(tx - sx), _sign(ty - sy)) == step


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _through(pos: dict[str, tuple[int, int]], p: PlacedPassage) -> int:
    """How many rooms the straight line of passage `p` runs through."""
    return sum(1 for room, cell in pos.items() if room not in (p.source, p.target) and _on_segment(cell, pos, p))


def _on_segment(cell: tuple[int, int], pos: dict[str, tuple[int, int]], p: PlacedPassage) -> bool:
    (ax, ay), (bx, by), (cx, cy) = pos[p.source], pos[p.target], cell
    if cell in ((ax, ay), (bx, by)):
        return False
    dx, dy = bx - ax, by - ay
    t = ((cx - ax) * dx + (cy - ay) * dy) / (dx * dx + dy * dy or 1)
    if not 0 < t < 1:
        return False
    # a room's box is about 0.8 × 0.5 of a cell: a line within that of its centre runs through it
    return abs(ax + t * dx - cx) < 0.42 and abs(ay + t * dy - cy) < 0.3


def _cross(pos: dict[str, tuple[int, int]], a: PlacedPassage, b: PlacedPassage) -> bool:
    """Two passages cross: their segments meet anywhere but at a room they share."""
    ends_a, ends_b = {a.source, a.target}, {b.source, b.target}
    if ends_a & ends_b:
        return False
    p1, p2, p3, p4 = pos[a.source], pos[a.target], pos[b.source], pos[b.target]
    d1, d2, d3, d4 = _turn(p3, p4, p1), _turn(p3, p4, p2), _turn(p1, p2, p3), _turn(p1, p2, p4)
    if d1 * d2 < 0 and d3 * d4 < 0:
        return True
    return (
        (d1 == 0 and _between(p3, p4, p1))
        or (d2 == 0 and _between(p3, p4, p2))
        or (d3 == 0 and _between(p1, p2, p3))
        or (d4 == 0 and _between(p1, p2, p4))
    )


def _turn(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int]) -> int:
    v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
    return (v > 0) - (v < 0)


def _between(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int]) -> bool:
    return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])


def _count_crossings(pos: dict[str, tuple[int, int]], passages: tuple[PlacedPassage, ...]) -> int:
    return sum(1 for i, a in enumerate(passages) for b in passages[i + 1 :] if _cross(pos, a, b))


def count_crossings(layout: GridLayout) -> int:
    """Pairs of passages in `layout` drawn as lines that cross (for a check from outside)."""
    return _count_crossings(dict(layout.places), tuple(p for p in layout.passages if not p.stub))


def through_rooms(layout: GridLayout) -> int:
    """Passages in `layout` drawn as lines that run through a room that is not one of their ends."""
    pos = dict(layout.places)
    return sum(1 for p in layout.passages if not p.stub and _through(pos, p))
