"""The explored map laid out for the page: north up, east right, no two rooms on top of each other, even
for the whole of Zork I, whose geometry is not a plane."""

import pytest

from frobozz.games import GameLibrary, GameMap, GameSession
from frobozz.games._library import walkthrough_for
from frobozz.web._map import layout

pytestmark = pytest.mark.anyio


def overlapping(explored):
    rooms = explored.rooms
    return [(a.name, b.name) for i, a in enumerate(rooms) for b in rooms[i + 1:]
            if abs(a.x - b.x) < explored.box_w and abs(a.y - b.y) < explored.box_h]


def test_no_room_is_an_empty_map():
    empty = layout(GameMap.from_path([]), None)
    assert (empty.rooms, empty.links, empty.current) == ((), (), None)


def test_rooms_sit_where_the_compass_says_and_the_current_one_is_marked():
    explored = layout(GameMap.from_path([(None, "Start"), ("north", "North"), ("s", "Start"), ("east", "East"),
                                         ("go west", "Start"), ("up", "Attic")]), "East")
    at = {r.name: (r.x, r.y) for r in explored.rooms}
    assert at["North"][1] < at["Start"][1] and abs(at["North"][0] - at["Start"][0]) < explored.box_w
    assert at["East"][0] > at["Start"][0] and abs(at["East"][1] - at["Start"][1]) < explored.box_h
    assert at["Attic"][1] < at["Start"][1]
    assert explored.current.name == "East" and [r.name for r in explored.rooms if r.current] == ["East"]
    assert len(explored.links) == 3  # one line for a pair of rooms joined both ways
    assert all(0 < x < explored.width and 0 < y < explored.height for x, y in at.values())


def test_a_long_room_name_wraps_into_its_box():
    [room] = layout(GameMap.from_path([(None, "Dam Lobby Of The Flood Control Dam Number Three")]), None).rooms
    assert len(room.lines) == 2 and all(len(line) <= 20 for line in room.lines)


async def test_the_whole_walkthrough_of_zork1_is_laid_out_with_no_room_on_another(settings):
    story = GameLibrary(settings).find("zork1")
    game = await GameSession.open(story, settings)
    try:
        for command in walkthrough_for(story.md5):
            await game.act(command)
        explored = layout(game.map(), game.current.location)
    finally:
        await game.aclose()
    assert len(explored.rooms) > 60 and not overlapping(explored)
    assert explored.current is not None and explored.width < 60 * explored.box_w  # wide, but not a line of rooms
