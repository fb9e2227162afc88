import json

import pytest

from frobozz.engine import AssistantMessage, EngineError, UserMessage, list_sessions, transcript_path
from frobozz.engine._transcripts import replay


def test_transcripts_live_under_claude_config_dir_when_set_else_home():
    cwd = "/srv/my project.v2_x"  # every character but letters and digits becomes '-'
    assert (
        str(transcript_path("abc-123", cwd, {"HOME": "/home/u"}))
        == "/home/u/.claude/projects/-srv-my-project-v2-x/abc-123.jsonl"
    )
    assert (
        str(transcript_path("abc-123", cwd, {"HOME": "/home/u", "CLAUDE_CONFIG_DIR": "/etc/claude-x"}))
        == "/etc/claude-x/projects/-srv-my-project-v2-x/abc-123.jsonl"
    )


@pytest.mark.parametrize("bad", ["", "../../etc/passwd", "a/b", "x" * 300, "id with space"])
def test_a_session_id_that_could_escape_the_projects_folder_is_refused(tmp_path, bad):
    with pytest.raises(EngineError, match="is not a session id"):
        transcript_path(bad, tmp_path, {"HOME": str(tmp_path)})


def test_replay_and_listing_read_claudes_jsonl_and_skip_what_is_not_conversation(tmp_path):
    env = {"HOME": str(tmp_path)}
    path = transcript_path("s1", tmp_path, env)
    path.parent.mkdir(parents=True)
    lines = [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-01-01T00:00:00Z"},
        {"type": "user", "message": {"role": "user", "content": "hello there"}, "timestamp": "2026-01-01T00:00:01Z"},
        {"type": "user", "isMeta": True, "message": {"role": "user", "content": "meta"}},
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            "timestamp": "2026-01-01T00:00:02Z",
        },
        {"type": "assistant", "isSidechain": True, "message": {"role": "assistant", "content": "sub-agent"}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    events = list(replay(path))
    assert [type(e) for e in events] == [UserMessage, AssistantMessage]
    assert all(e.is_replay for e in events) and events[1].text == "hi"
    [info] = list_sessions(tmp_path, env)
    assert (info.session_id, info.preview, info.created, info.last_activity) == (
        "s1",
        "hello there",
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:02Z",
    )
    assert list_sessions(tmp_path / "elsewhere", env) == []
