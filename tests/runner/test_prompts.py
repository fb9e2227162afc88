from pathlib import Path

from frobozz.games import Turn
from frobozz.runner._prompts import instructions, load_template, status_header, turn_in


def test_the_status_header_carries_score_moves_place_and_turn_and_can_be_read_back():
    turn = Turn(number=3, command="n", text="", score=10, moves=7, location="Kitchen")
    header = status_header("Zork I", turn, 350, 7, 400)
    assert header == "[Zork I · score 10/350 · moves 7 · Kitchen · turn 7 of 400]"
    assert turn_in(f"{header}\n\nKitchen\nYou are in the kitchen.") == 7
    assert turn_in(status_header("Zork I", turn, None, 12, None)) == 12
    assert turn_in("no header here, turn 5 of the story") is None


def test_the_instructions_are_a_replaceable_template(tmp_path: Path):
    default = instructions(load_template(None, tools=False), title="Zork I", game="zork1", max_score=350, multi=True)
    assert "<command>" in default and "350 points" in default and "several commands" in default
    custom = tmp_path / "prompt.md"
    custom.write_text("Play $title ($game) for $max_score points. $unknown stays.")
    text = instructions(load_template(custom, tools=False), title="Zork I", game="zork1", max_score=None, multi=False)
    assert text == "Play Zork I (zork1) for unknown points. $unknown stays."
