"""Claude's transcript as the plugin archives it: secrets redacted, only the session's own file read."""

from __future__ import annotations

import json
from pathlib import Path

from frobozz.plugin._redact import MASK, redact, redact_value
from frobozz.plugin._transcript import read_transcript, tool_steps


def test_nothing_to_redact_leaves_the_text_as_it_was():
    for text in ["", "a dog", "input_tokens: 1234567", "author: Jonathan", "the password is long"]:
        assert redact(text) == text


def test_keys_tokens_and_credentials_of_the_known_forms_are_redacted():
    secrets = {
        "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz end": "abcdefghijklmnop",
        "AKIAIOSFODNN7EXAMPLE": "AKIA",
        "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789": "ghp_",
        'password = "hunter2hunter2"': "hunter2",
        "Authorization: Bearer abcdefghijklmnop1234": "abcdefgh",
        "postgresql://bob:s3cretpass@127.0.0.1/db": "s3cret",
        "FROBOZZ_TOKEN=abcdef123456": "abcdef1",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----": "MIIEow",
    }
    for text, secret in secrets.items():
        assert secret not in redact(text) and MASK in redact(text), text
    assert redact_value({"api_key": "xyz", "n": 5, "list": ["ghp_abcdefghijklmnopqrstuvwxyz0123456789"]}) == {
        "api_key": MASK,
        "n": 5,
        "list": [MASK],
    }


def test_a_huge_or_hostile_text_is_redacted_and_ends():
    """A catastrophic backtrack would not end (the suite's timeout would say so)."""
    assert MASK in redact("password=" * 100_000 + "a" * 1_000_000)
    assert redact("-----BEGIN RSA PRIVATE KEY-----" + "x" * 1_000_000) == MASK


def test_only_the_sessions_own_transcript_is_read(tmp_path: Path):
    other = tmp_path / "notes.jsonl"
    other.write_text('{"type": "user"}\n')
    assert read_transcript(str(other), "s-1") is None
    assert read_transcript("", "s-1") is None and read_transcript(str(tmp_path / "s-1.jsonl"), "s-1") is None
    mine = tmp_path / "s-1.jsonl"
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo sk-ant-abcdefghijklmnopqrst"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "done"}]}
    mine.write_text(
        "\n".join(
            [
                json.dumps({"type": "assistant", "message": {"content": [use]}}),
                "{cut off",
                json.dumps({"type": "user", "message": {"content": [result]}}),
            ]
        )
    )
    (tmp_path / "s-1" / "subagents").mkdir(parents=True)
    (tmp_path / "s-1" / "subagents" / "agent-a.jsonl").write_text('{"type": "user", "message": {"content": "hi"}}\n')
    transcript = read_transcript(str(mine), "s-1")
    assert transcript.project_key == tmp_path.name and len(transcript.main) == 2
    assert list(transcript.subagents) == ["subagents/agent-a"]
    assert [(kind, data["id"]) for kind, _, data in tool_steps(transcript.main)] == [
        ("tool_use", "t1"),
        ("tool_result", "t1"),
    ]
    assert "sk-ant" not in json.dumps(transcript.main)
