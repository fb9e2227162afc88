"""map.png: the explored map drawn north up, from nothing on."""

from frobozz.games import GameMap
from frobozz.runner._report import map_image

PNG = b"\x89PNG\r\n\x1a\n"


def test_an_empty_map_is_still_an_image_that_says_no_room_was_seen(tmp_path):
    map_image(GameMap.from_path([]), tmp_path / "map.png", title="nothing yet")
    assert (tmp_path / "map.png").read_bytes().startswith(PNG)


def test_a_walk_is_drawn_with_its_current_room(tmp_path):
    explored = GameMap.from_path(
        [
            (None, "West of House"),
            ("n", "North of House"),
            ("e", "Behind House"),
            ("enter window", "Kitchen"),
            ("up", "Attic"),
        ]
    )
    map_image(explored, tmp_path / "map.png", title="Zork I", current="Attic")
    assert (tmp_path / "map.png").read_bytes().startswith(PNG)


def test_a_score_reads_as_points_of_the_most_and_a_run_with_none_yet_shows_a_dash():
    from frobozz.runner import score_text

    assert [score_text(None, 350), score_text(0, 350), score_text(42, 350), score_text(7, None)] == [
        "-",
        "0/350",
        "42/350",
        "7",
    ]
