"""The tool log, on a real claude CLI against a scripted model: each call's target, sizes, duration and
outcome (ok, error, denied), as a record and as one line."""

import logging

import pytest

from frobozz.engine import Allow, Deny, Result, Session
from frobozz.engine.observers import ToolLog
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse, replies
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio


async def test_a_session_with_no_tool_call_logs_nothing(make_options):
    log = ToolLog()
    async with ScriptedModel(replies("just words")) as model:
        async with Session(make_options(model), observers=[log]) as session:
            await session.send("hi")
            await until(session.events(), Result)
    assert log.calls == []


async def test_each_call_is_logged_with_its_target_sizes_and_outcome(make_options, claude_home, caplog):
    notes = claude_home / "notes.md"
    notes.write_text("the lamp is lit\n")
    log = ToolLog(cwd=claude_home)
    outside = claude_home.parent / "elsewhere" / "escape.md"

    async def guard(name, tool_input, context):
        if name == "Write" and not str(tool_input.get("file_path", "")).startswith(str(claude_home)):
            log.denied(context.tool_use_id)
            return Deny("outside the workspace")
        return Allow()

    script = replies(
        Reply((ToolUse("Read", {"file_path": str(notes)}),)),
        Reply(
            (
                ToolUse(
                    "Edit", {"file_path": str(notes), "old_string": "lamp is lit", "new_string": "brass lamp is out"}
                ),
            )
        ),
        Reply((ToolUse("Write", {"file_path": str(outside), "content": "x" * 40}),)),
        Reply((ToolUse("Read", {"file_path": str(claude_home / "missing.md")}),)),
        "done",
    )
    caplog.set_level(logging.INFO, logger="frobozz.tools")
    async with ScriptedModel(script) as model:
        async with Session(make_options(model, can_use_tool=guard), observers=[log]) as session:
            await session.send("tidy the notes")
            await until(session.events(), Result)
    assert [(c.name, c.target[:40], c.outcome) for c in log.calls] == [
        ("Read", "notes.md", "ok"),
        ("Edit", "notes.md", "ok"),
        ("Write", str(outside)[:40], "denied"),
        ("Read", "missing.md", "error"),
    ]
    assert len(log.calls[2].target) <= 80  # a long path is cut, in brief
    edit = log.calls[1]
    assert edit.input_size == "old 11, new 17 chars" and edit.line().startswith(
        "[tool] Edit notes.md (old 11, new 17 chars) ok "
    )
    assert log.calls[2].input_size == "40 chars" and log.calls[0].output_chars > len("the lamp is lit")
    assert all(c.duration_ms >= 0 for c in log.calls)
    assert [r.getMessage() for r in caplog.records if r.name == "frobozz.tools"] == [c.line() for c in log.calls]
    assert not outside.exists()


def test_a_target_with_control_characters_is_logged_escaped_so_it_cannot_drive_the_terminal():
    from frobozz.engine.observers._tool_log import ToolCall, target_of

    target = target_of({"command": "echo \x1b[2J\x1b]0;pwned\x07 done\x00"})
    assert "\x1b" not in target and "\x07" not in target and "\x00" not in target
    assert target == "echo \\x1b[2J\\x1b]0;pwned\\x07 done\\x00"
    line = ToolCall("t1", "Bash\x1b[31m", target, "9 chars in", 0, 5, "ok", 0.0).line()
    assert line.isprintable() and line.startswith("[tool] Bash\\x1b[31m echo")
    assert target_of({"file_path": "/tmp/plain name.md"}) == "/tmp/plain name.md"  # printable text is untouched
