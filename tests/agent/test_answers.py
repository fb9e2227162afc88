"""What an answer to AskUserQuestion may be, as claude's own schema takes it: each asked question's text to a
string; for a multi-select question, a list of strings too (claude joins them)."""

import pytest

from frobozz.agent._answers import checked
from frobozz.agent.exceptions import InputError

ASKED = [
    {"question": "Which colours?", "header": "Colours", "multiSelect": True, "options": []},
    {"question": "Which lamp?", "header": "Lamp", "multiSelect": False, "options": []},
]


def test_a_multi_select_question_takes_a_list_of_strings_and_any_question_a_string():
    given = {"Which colours?": ["Red", "Blue"], "Which lamp?": "the brass one"}
    assert checked(ASKED, given) == given
    assert checked(ASKED, {"Which colours?": "Red"}) == {"Which colours?": "Red"}  # (some questions only)


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        ({"Which colours?": ["Red", 5]}, "'Which colours?' is [\"Red\", 5]"),
        ({"Which colours?": None}, "is null"),
        ({"Which lamp?": ["Red"]}, "not a multi-select"),
        ({"Which lamp?": True}, "is true"),
        ({"Which colours?": ["Red\x00"]}, "NUL"),
        ({"Which lamp?": "\ud800"}, "unpaired"),
        ({"Which car?": "Red"}, "'Which car?' was not asked; the questions asked: 'Which colours?'; 'Which lamp?'"),
    ],
)
def test_an_answer_claude_could_not_use_is_refused_naming_what_is_wrong(answers, says):
    with pytest.raises(InputError) as refused:
        checked(ASKED, answers)
    assert says in str(refused.value)
