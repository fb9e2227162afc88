"""The archive observer on a real claude CLI (scripted model) and a real Postgres."""

import pytest

from frobozz.engine import Restarted, Result, Session
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from frobozz.loop._archive import ArchiveObserver
from tests.engine.conftest import of, send_and_kill_mid_turn, until

pytestmark = pytest.mark.anyio


async def test_every_turn_is_archived_even_when_claude_is_killed_mid_turn_and_restarted(make_options, sessions):
    slow = Reply((Text("slow " * 200),), delay=0.05)
    calls = []

    def script(request):
        calls.append(request.last_user_text())
        return slow if len(calls) == 2 else f"echo: {request.last_user_text()}"

    loop_session = await sessions.open("chat", client="test")
    archive = ArchiveObserver(sessions, loop_session.id)
    async with ScriptedModel(script) as model:
        async with Session(make_options(model), observers=[archive]) as session:
            await archive.archive_user("first")
            await session.send("first")
            await until(session.events(), Result)
            await archive.archive_user("second")
            events = await send_and_kill_mid_turn(session, "second", calls, answering=2)
            await session.wait_idle()
    assert of(events, Restarted)[0].resumed
    entries = await sessions.transcript(loop_session.id)
    assert [(e.turn, e.kind, e.content) for e in entries] == [
        (1, "user", "first"),
        (1, "assistant", "echo: first"),
        (1, "usage", "echo: first"),
        (2, "user", "second"),
        (2, "assistant", "echo: second"),
        (2, "usage", "echo: second"),
    ]
    assert entries[2].data["output_tokens"] > 0 and entries[2].data["cost_usd"] >= 0
    assert (await sessions.get(loop_session.id)).claude_session_id == session.session_id


async def test_tool_calls_are_archived_in_brief_and_a_cortex_store_clears_the_suggestions(make_options, sessions):
    def script(request):
        if request.last_user_text() == "remember it" and not request.tool_results():
            return Reply((ToolUse("mcp__cortex__store", {"content": "The lamp is lit. " * 100}),))
        return "done"

    loop_session = await sessions.open("chat")
    await sessions.suggest(loop_session.id, ["The lamp is lit."])
    archive = ArchiveObserver(sessions, loop_session.id)
    async with ScriptedModel(script) as model:
        async with Session(make_options(model), observers=[archive]) as session:
            await session.send("remember it")
            await until(session.events(), Result)
            await session.wait_idle()
    entries = await sessions.transcript(loop_session.id)
    [use] = [e for e in entries if e.kind == "tool_use"]
    [result] = [e for e in entries if e.kind == "tool_result"]
    assert use.content.startswith("mcp__cortex__store {") and "characters)" in use.content and len(use.content) < 600
    assert result.data["id"] == use.data["id"]  # claude refuses the unknown tool: the result is archived too
    assert await sessions.suggestions(loop_session.id) == []
