from frobozz.games._text import clean_output, looks_like_game_over


def test_the_echoed_prompt_and_stale_status_line_are_stripped():
    raw = (
        "> West of House" + " " * 90 + "Score: 0                Moves: 2              \n"
        "North of House\nYou are facing the north side of a white house.\n\n"
    )
    assert clean_output(raw) == "North of House\nYou are facing the north side of a white house."


def test_text_without_an_echo_is_kept_as_it_is():
    assert clean_output("Taken.\n\n") == "Taken."
    assert clean_output("Score: 10 is not a status line here\n") == "Score: 10 is not a status line here"


def test_a_trailing_prompt_is_removed():
    assert clean_output("Opening the mailbox reveals a leaflet.\n\n>") == "Opening the mailbox reveals a leaflet."


def test_the_end_of_a_game_is_recognised_in_infocom_and_inform_wording():
    assert looks_like_game_over(
        "Would you like to restart the game from the beginning, restore a saved game, or end this session of the game?"
    )
    assert looks_like_game_over("Would you like to RESTART, RESTORE a saved game or QUIT?")
    assert not looks_like_game_over("You could restore the painting to its frame.")
