"""The explored map on a grid, north up: the layout map.png and the web page share."""

from frobozz.games import GameMap, PassageKind, count_crossings, grid_layout, through_rooms


def test_no_room_is_an_empty_layout():
    layout = grid_layout(GameMap.from_path([]))
    assert (layout.places, layout.passages, layout.crossings, layout.width, layout.height) == ((), (), 0, 0, 0)


def test_north_is_above_east_is_right_and_up_down_and_in_out_are_passages_of_their_own():
    explored = GameMap.from_path(
        [
            (None, "West of House"),
            ("n", "North of House"),
            ("e", "Behind House"),
            ("enter window", "Kitchen"),
            ("up", "Attic"),
            ("down", "Kitchen"),
            ("w", "Living Room"),
        ]
    )
    layout = grid_layout(explored)
    at = dict(layout.places)
    assert at["North of House"][1] < at["West of House"][1] and at["North of House"][0] == at["West of House"][0]
    assert at["Behind House"][0] > at["North of House"][0] and at["Behind House"][1] == at["North of House"][1]
    assert at["Attic"][1] < at["Kitchen"][1] and at["Living Room"][0] < at["Kitchen"][0]
    kinds = {(p.source, p.target): (p.kind, p.label, p.both_ways) for p in layout.passages}
    assert kinds[("Kitchen", "Attic")] == (PassageKind.VERTICAL, "up", True)  # one line for up and back down
    assert kinds[("Behind House", "Kitchen")] == (PassageKind.INOUT, "enter window", False)
    assert kinds[("West of House", "North of House")] == (PassageKind.COMPASS, "n", False)
    assert len(set(at.values())) == len(at) and layout.crossings == 0 and through_rooms(layout) == 0


def test_a_room_reached_past_another_is_not_drawn_through_it_nor_across_a_passage():
    """Straight along its direction `Far` would sit behind `Near`, its line running through it (and the loop
    back would cross): it is put where nothing is crossed, still east of where it was entered."""
    explored = GameMap.from_path(
        [
            (None, "Start"),
            ("e", "Near"),
            ("w", "Start"),
            ("n", "North"),
            ("se", "Mid"),
            ("e", "Far"),
            ("w", "Mid"),
            ("s", "South"),
            ("ne", "Far"),
        ]
    )
    layout = grid_layout(explored)
    at = dict(layout.places)
    assert len(set(at.values())) == len(at)
    assert count_crossings(layout) == layout.crossings == 0 and through_rooms(layout) == 0
    assert at["Far"][0] > at["Mid"][0] and at["North"][1] < at["Start"][1]


def test_hostile_and_huge_room_names_are_only_names():
    names = ['"];<script>', "x" * 10_000, "\x00"]
    layout = grid_layout(GameMap.from_path([(None, names[0]), ("n", names[1]), ("climb tree", names[2])]))
    assert {room for room, _ in layout.places} == set(names) and layout.crossings == 0


def test_a_teleport_whose_line_would_cross_a_passage_is_drawn_as_two_labelled_stubs():
    explored = GameMap.from_path(
        [
            (None, "Altar"),
            ("e", "Temple"),
            ("n", "Dome"),
            ("w", "Torch"),
            ("s", "Altar"),
            ("ne", "Dome"),
            ("sw", "Altar"),
            ("e", "Temple"),
            ("pray", "Torch"),
        ]
    )
    layout = grid_layout(explored)
    kinds = {(p.source, p.target): (p.kind, p.stub) for p in layout.passages}
    assert kinds[("Temple", "Torch")] == (PassageKind.INOUT, True)
    assert kinds[("Altar", "Dome")] == (PassageKind.COMPASS, False)  # compass passages are always lines
    assert layout.crossings == count_crossings(layout) == 0
