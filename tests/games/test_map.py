from frobozz.games import GameMap, Passage


def _zork_path():
    return [
        (None, "West of House"),
        ("n", "North of House"),
        ("look", "North of House"),
        ("e", "Behind House"),
        ("w", "Kitchen"),
        ("e", "Behind House"),
    ]


def test_rooms_are_listed_in_the_order_first_seen_and_moves_that_stay_put_are_not_passages():
    game_map = GameMap.from_path(_zork_path())
    assert game_map.rooms == ("West of House", "North of House", "Behind House", "Kitchen")
    assert game_map.passages == (
        Passage("West of House", "n", "North of House"),
        Passage("North of House", "e", "Behind House"),
        Passage("Behind House", "w", "Kitchen"),
        Passage("Kitchen", "e", "Behind House"),
    )


def test_text_dot_and_mermaid_name_every_room_and_passage():
    game_map = GameMap.from_path(_zork_path())
    text = game_map.render("text")
    assert text.startswith("4 rooms, 4 passages") and "  w -> Kitchen" in text
    dot = game_map.render("dot")
    assert dot.startswith("digraph map {") and 'label="Kitchen"' in dot and dot.count("->") == 4
    mermaid = game_map.render("mermaid")
    assert mermaid.startswith("flowchart LR") and mermaid.count("-->") == 4


def test_hostile_room_names_cannot_break_out_of_dot_or_mermaid_labels():
    game_map = GameMap.from_path([(None, 'A"];evil[label="x'), ("n", "B|]}#")])
    dot = game_map.to_dot()
    assert '"A\\"];evil[label=\\"x"' in dot
    mermaid = game_map.to_mermaid()
    assert '"' not in mermaid.split('["', 1)[1].split('"]', 1)[0]
    assert "B#124;#93;#125;#35;" in mermaid


def test_an_empty_path_gives_an_empty_map():
    assert GameMap.from_path([]).render("text") == "0 rooms, 0 passages"
