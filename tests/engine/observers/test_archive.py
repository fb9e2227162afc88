import json

import pytest

from frobozz.engine import Result, Session
from frobozz.engine.observers import TranscriptArchive
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse, replies
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio


async def test_the_archive_keeps_jsonl_and_markdown_of_a_real_session(make_options, tmp_path):
    archive = TranscriptArchive(tmp_path / "archive")
    script = replies(Reply((Text("Let me look."), ToolUse("Glob", {"pattern": "*.nothing"}))), "Nothing there.")
    async with ScriptedModel(script) as model:
        async with Session(make_options(model, allowed_tools=["Glob"]), observers=[archive]) as session:
            await session.send("find files")
            await until(session.events(), Result)
            await session.wait_idle()
    archive.close()
    session_id = session.session_id
    records = [json.loads(line) for line in (tmp_path / "archive" / f"{session_id}.jsonl").read_text().splitlines()]
    assert records[0]["type"] == "system" and "result" in [r["type"] for r in records]
    assert records[-1] == {"type": "ProcessExit", "exit_code": 0, "stderr": records[-1]["stderr"], "expected": True}
    markdown = (tmp_path / "archive" / f"{session_id}.md").read_text()
    assert markdown.startswith(f"# Session {session_id}")
    assert "**assistant:** Let me look." in markdown and "tool call `Glob`" in markdown
    assert "**assistant:** Nothing there." in markdown and "turn ended: success" in markdown
