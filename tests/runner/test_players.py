"""The offline players' sense of where they are: which walkthrough command comes next, read from the window
claude sends (the status line's turn, plus the acts that were played after it), one or several a message; and
whether claude can play at all."""

import json
from pathlib import Path

import pytest

from frobozz.engine.scripted import MessagesRequest, Reply
from frobozz.runner._extract import extract_commands
from frobozz.runner._players import claude_readiness, text_handler, tool_handler
from frobozz.runner._prompts import PAUSED

COMMANDS = ["N", "E", "Open window", "W", "Get lamp"]
SESSION = "0123456789abcdef"
STOPPED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected. Correction to the text above: "
    "this call was stopped while running, not refused before it ran. It may have run in part or in full."
)


def act(use_id: str, command: str) -> dict:
    return {
        "type": "tool_use",
        "id": use_id,
        "name": "mcp__game__act",
        "input": {"session_id": SESSION, "command": command},
    }


def result(use_id: str, text: str, *, error: bool = False) -> dict:
    return {"type": "tool_result", "tool_use_id": use_id, "content": text, "is_error": error}


def answer(moves: int) -> str:
    return f'{{"session_id":"{SESSION}","text":"...","moves":{moves}}}'


def orientation(turn: int) -> dict:
    return {
        "type": "text",
        "text": f"[Zork I · score 0 · moves {turn} · Kitchen · turn {turn} of 40]\n\nsession_id {SESSION}",
    }


def next_command(messages: list[dict]) -> str:
    reply = tool_handler(COMMANDS, "zork1")(
        MessagesRequest(body={"messages": messages}, path="/v1/messages", headers={})
    )
    assert isinstance(reply, Reply)
    return reply.blocks[-1].input["command"]


def test_each_act_answered_after_the_status_line_moves_the_player_one_command_on():
    messages = [
        {"role": "user", "content": [orientation(1)]},
        {"role": "assistant", "content": [act("a2", "E")]},
        {"role": "user", "content": [result("a2", answer(2))]},
    ]
    assert next_command(messages) == "Open window"


def test_an_act_stopped_by_an_interrupt_or_refused_by_a_paused_run_was_not_played():
    """A full window handed off mid-turn: the act under way is stopped, and the new window's orientation comes
    after its result in the same message. It counted as played once, and the player skipped a command."""
    messages = [
        {"role": "user", "content": "Summary: the scripted player is playing through the game tools."},
        {"role": "assistant", "content": [act("a3", "Open window"), act("a4", "W")]},
        {
            "role": "user",
            "content": [
                result("a3", STOPPED, error=True),
                result("a4", f"{PAUSED}: a new window.", error=True),
                {"type": "text", "text": "[Request interrupted by user for tool use]"},
                orientation(2),
            ],
        },
    ]
    assert next_command(messages) == "Open window"


def test_an_act_stopped_or_refused_after_the_status_line_is_played_again():
    for refused in (
        [result("a2", STOPPED, error=True), {"type": "text", "text": "[Request interrupted by user for tool use]"}],
        [result("a2", f"{PAUSED}: a new window.", error=True), {"type": "text", "text": "Keep playing."}],
    ):
        messages = [
            {"role": "user", "content": [orientation(1)]},
            {"role": "assistant", "content": [act("a2", "E")]},
            {"role": "user", "content": refused},
        ]
        assert next_command(messages) == "E"


def test_an_act_answered_before_the_orientation_in_the_same_message_is_counted_once():
    """The orientation's turn already counts what was played before it."""
    messages = [
        {"role": "assistant", "content": [act("a3", "Open window")]},
        {"role": "user", "content": [result("a3", answer(3)), orientation(3)]},
    ]
    assert next_command(messages) == "W"


def test_an_act_the_game_refused_for_another_reason_counts_and_the_player_goes_on():
    """A command of a user's script that the game refuses (not a pause, not an interrupt) is not tried again."""
    messages = [
        {"role": "user", "content": orientation(1)["text"]},  # a status line in a plain string
        {"role": "assistant", "content": [act("a2", "E")]},
        {"role": "user", "content": [result("a2", "Error executing tool act: the game refused it", error=True)]},
    ]
    assert next_command(messages) == "Open window"


def test_with_several_a_message_makes_that_many_acts_in_order_and_the_last_ones_are_what_is_left():
    request = MessagesRequest(
        body={"messages": [{"role": "user", "content": [orientation(1)]}]}, path="/v1/messages", headers={}
    )
    reply = tool_handler(COMMANDS, "zork1", several=3)(request)
    assert isinstance(reply, Reply)
    assert [b.input["command"] for b in reply.blocks[1:]] == ["E", "Open window", "W"]
    assert len({b.id for b in reply.blocks[1:]}) == 3
    request.body["messages"][0]["content"] = [orientation(3)]
    reply = tool_handler(COMMANDS, "zork1", several=3)(request)
    assert isinstance(reply, Reply) and [b.input["command"] for b in reply.blocks[1:]] == ["W", "Get lamp"]


def test_with_several_the_text_player_tags_that_many_commands_from_the_status_lines_turn():
    def reply_to(turn: int, several: int) -> str:
        request = MessagesRequest(
            body={"messages": [{"role": "user", "content": [orientation(turn)]}]}, path="/v1/messages", headers={}
        )
        reply = text_handler(COMMANDS, several=several)(request)
        assert isinstance(reply, Reply)
        return reply.blocks[0].text

    assert extract_commands(reply_to(1, 3), multi=True) == ["E", "Open window", "W"]
    assert extract_commands(reply_to(4, 3), multi=True) == ["Get lamp"]
    assert extract_commands(reply_to(1, 1), multi=True) == ["E"]  # one a reply, in its rotating style


CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")  # each logs claude in


def _claude_answering(tmp_path, status: dict) -> tuple[str, Path]:
    """A claude that answers `auth status` with `status` and notes each time it is asked."""
    asked = tmp_path / "asked"
    claude = tmp_path / "claude"
    claude.write_text(f"#!/bin/sh\necho \"key:${{ANTHROPIC_API_KEY-unset}}\" >> {asked}\necho '{json.dumps(status)}'\n")
    claude.chmod(0o755)
    return str(claude), asked


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_a_credential_in_the_environment_is_enough_and_claude_is_not_started_to_ask(tmp_path, monkeypatch, credential):
    claude, asked = _claude_answering(tmp_path, {"loggedIn": False})
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(credential, "sk-something")
    assert claude_readiness(claude) is None
    assert not asked.exists()


def test_without_a_credential_claude_is_asked_and_an_empty_or_blank_one_counts_as_none(tmp_path, monkeypatch):
    """claude's status counts a key of spaces as logged in, but its run then says "Not logged in"."""
    claude, asked = _claude_answering(tmp_path, {"loggedIn": False})
    for name in CREDENTIALS:
        monkeypatch.setenv(name, "" if name.startswith("CLAUDE") else " \t")
    problem = claude_readiness(claude)
    assert problem is not None and "not logged in" in problem and "--player walkthrough" in problem
    assert asked.read_text() == "key:unset\n"  # asked without the blank ones
    claude, _ = _claude_answering(tmp_path, {"loggedIn": True})
    assert claude_readiness(claude) is None
