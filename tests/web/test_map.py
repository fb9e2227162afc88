"""The explored map laid out for the page: north up, east right, no two rooms on top of each other, even
for the whole of Zork I, whose geometry is not a plane."""

import pytest

from frobozz.games import GameLibrary, GameMap, GameSession, grid_layout, through_rooms
from frobozz.games._library import walkthrough_for
from frobozz.web._map import layout

pytestmark = pytest.mark.anyio


def overlapping(explored):
    rooms = explored.rooms
    return [
        (a.name, b.name)
        for i, a in enumerate(rooms)
        for b in rooms[i + 1 :]
        if abs(a.x - b.x) < explored.box_w and abs(a.y - b.y) < explored.box_h
    ]


def test_no_room_is_an_empty_map():
    empty = layout(GameMap.from_path([]), None)
    assert (empty.rooms, empty.links, empty.current) == ((), (), None)


def test_rooms_sit_where_the_compass_says_and_the_current_one_is_marked():
    explored = layout(
        GameMap.from_path(
            [
                (None, "Start"),
                ("north", "North"),
                ("s", "Start"),
                ("east", "East"),
                ("go west", "Start"),
                ("up", "Attic"),
            ]
        ),
        "East",
    )
    at = {r.name: (r.x, r.y) for r in explored.rooms}
    assert at["North"][1] < at["Start"][1] and abs(at["North"][0] - at["Start"][0]) < explored.box_w
    assert at["East"][0] > at["Start"][0] and abs(at["East"][1] - at["Start"][1]) < explored.box_h
    assert at["Attic"][1] < at["Start"][1]
    assert explored.current.name == "East" and [r.name for r in explored.rooms if r.current] == ["East"]
    assert len(explored.links) == 3  # one line for a pair of rooms joined both ways
    assert all(0 < x < explored.width and 0 < y < explored.height for x, y in at.values())


def test_a_long_room_name_wraps_into_its_box():
    [room] = layout(GameMap.from_path([(None, "Dam Lobby Of The Flood Control Dam Number Three")]), None).rooms
    assert len(room.lines) == 3 and all(len(line) <= 20 for line in room.lines)
    assert " ".join(room.lines) == "Dam Lobby Of The Flood Control Dam Number Three"  # nothing cut off


async def test_the_whole_walkthrough_of_zork1_is_laid_out_with_no_room_on_another(settings):
    story = GameLibrary(settings).find("zork1")
    game = await GameSession.open(story, settings)
    try:
        steps = walkthrough_for(story.md5)
        for command in steps[:40]:
            await game.act(command)
        early = grid_layout(game.map())  # house, forest, cellar, the troll: a plane with a level under it
        for command in steps[40:]:
            await game.act(command)
        explored = layout(game.map(), game.current.location)
        grid = grid_layout(game.map())
    finally:
        await game.aclose()
    assert len(early.places) > 15 and early.crossings == 0 and through_rooms(early) == 0
    assert "West of House" in dict(early.places) and "magic boat" not in dict(grid.places)  # rooms, not vehicles
    # the whole game is no plane (a river, a rainbow, prayers that move you): the long ways up, down and
    # round are stubs that say where they lead, and of the lines drawn almost none cross, none through a room
    assert grid.crossings <= 2 and through_rooms(grid) == 0
    assert {p.label for p in grid.passages if p.stub} >= {"pray"}
    ways = {(link.way, link.kind) for link in explored.links}
    assert {
        ("n", "compass"),
        ("up", "vertical"),
        ("down", "vertical"),
        ("pray → Forest", "inout"),
        ("from Altar (pray)", "inout"),
    } <= ways
    assert len(explored.rooms) > 60 and not overlapping(explored)
    assert explored.current is not None and explored.width < 60 * explored.box_w  # wide, but not a line of rooms
