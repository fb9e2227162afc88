import pytest

from frobozz.runner import extract_commands


@pytest.mark.parametrize(
    "reply, command",
    [
        ("I should check the mailbox.\n<command>open mailbox</command>", "open mailbox"),
        ("<COMMAND> take   leaflet </COMMAND>", "take leaflet"),
        ("Going north seems best.\n\n> north", "north"),
        ("Reasoning about the room...\nCOMMAND: go east", "go east"),
        ("**Command:** `read leaflet`", "read leaflet"),
        ("The house is boarded up. I will walk around it.\n\nwalk around the house.", "walk around the house"),
        ("- take lamp", "take lamp"),
        ("<thinking>maybe <command>jump</command></thinking>\n<command>look</command>", "look"),
    ],
)
def test_the_command_is_found_however_the_reply_phrases_it(reply, command):
    assert extract_commands(reply) == [command]


def test_tags_win_over_lines_and_several_run_in_order_only_with_multi():
    reply = "> ignored\n<command>n</command> then <command>e</command>"
    assert extract_commands(reply) == ["n"]
    assert extract_commands(reply, multi=True) == ["n", "e"]


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "I am not sure what to do here. Maybe I should think about the puzzle for a while longer before acting.",
        "What should I do next?",
        "Let me look around",
        "<command></command>",
        "<command>look\x1b[2J</command>",
        "<command>" + "n" * 10_000 + "</command>",
    ],
)
def test_replies_without_a_usable_command_give_none(reply):
    assert extract_commands(reply) == []
