"""The plugin in the real claude CLI (print mode) against the scripted model: memories reach the model's
request through the hooks, once per session; a new session is oriented; a compaction is followed by the
hand-off letter; with memory unreachable the prompt goes through unchanged."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from frobozz.engine import find_claude, project_key
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse
from frobozz.memory import MemoryService, TranscriptStore
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

DOG = "The user's dog is called Rex."
STORE = "mcp__plugin_frobozz-memory_cortex__store"
LETTER = "We were naming the cat; where things stand: the name is chosen."
LEAKED = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's form, made up


def reply(request) -> str:  # type: ignore[no-untyped-def]
    text = request.last_user_text()
    if text.startswith("The conversation below is about to be compacted"):
        return f"{LETTER}\n- tell the vet"
    if text.startswith("Here is the last exchange"):
        return DOG if "dog" in text else "NONE"
    if request.tool_results():
        return "(scripted) the check printed its line" if "run the check" in said(request) else "(scripted) kept"
    if text.startswith("run the check"):
        return Reply((ToolUse("Bash", {"command": f"echo checked-ok GITHUB_TOKEN={LEAKED}"}),))
    if text.rsplit("\n", 1)[-1].startswith("keep it"):
        return Reply((ToolUse(STORE, {"content": DOG}),))
    return "(scripted) noted"


def claude_p(prompt: str, env: dict[str, str], cwd: Path, *more: str) -> dict:
    done = subprocess.run(
        [str(find_claude()), "-p", prompt, "--output-format", "json", *more],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def said(request) -> str:  # type: ignore[no-untyped-def]
    return json.dumps(request.body.get("messages", []))


def main_requests(scripted: ScriptedModel) -> list:
    """The conversation's requests (not claude's side calls, nor the daemon's sidecar questions)."""
    return [
        r
        for r in scripted.requests
        if r.body.get("tools")
        and not r.last_user_text().startswith(("The conversation below", "Here is the last exchange", "Summarise"))
    ]


async def test_a_stored_memory_reaches_the_first_prompt_and_not_the_next_of_the_same_session(
    installed, memories, project
):
    with ScriptedModel(reply) as scripted:
        env = {**installed, **scripted.env()}
        first = claude_p("What is my cat called?", env, project)
        [request] = main_requests(scripted)
        assert "# Orientation" in said(request) and "Build note 4" in said(request)  # the new session's
        assert "<recalled-memories>" in said(request) and "Zorkmid" in said(request)
        claude_p("And what is she afraid of, my cat?", env, project, "--resume", first["session_id"])
        second = main_requests(scripted)[-1]
        assert said(second).count("Zorkmid") == said(request).count("Zorkmid")  # only the first turn's, in history
        assert said(second).count("<recalled-memories>") == 1


async def test_a_compaction_is_followed_by_the_hand_off_letter(installed, memories, project):
    with ScriptedModel(reply) as scripted:
        env = {**installed, **scripted.env()}
        first = claude_p("What is my cat called?", env, project)
        claude_p("/compact", env, project, "--resume", first["session_id"])
        claude_p("Where were we?", env, project, "--resume", first["session_id"])
        after = main_requests(scripted)[-1]
        assert "Hand-off letter" in said(after) and LETTER in said(after) and "tell the vet" in said(after)


async def test_what_is_worth_keeping_is_offered_next_turn_until_the_model_stores_it(
    installed, project, cortex_settings
):
    with ScriptedModel(reply) as scripted:
        env = {**installed, **scripted.env()}
        first = claude_p("My dog is called Rex.", env, project)
        service = MemoryService(cortex_settings)
        try:
            sessions = await service.sessions()
            with anyio.fail_after(120):  # the daemon's sidecar claude reads the exchange in the background

                async def ready() -> object:
                    return await sessions.suggestions(first["session_id"])

                await eventually(ready, interval=0.2)
            more = ("--resume", first["session_id"], "--allowedTools", STORE)
            claude_p("keep it, please", env, project, *more)
            nudged = next(r for r in main_requests(scripted) if "keep it" in r.last_user_text())
            assert "<memory-nudge>" in said(nudged) and DOG in said(nudged)
            assert [m.content for m in await (await service.store()).recent(5, "myproject")] == [DOG]
            assert await sessions.suggestions(first["session_id"]) == []  # stored: the nudge is done
        finally:
            await service.aclose()


async def test_with_the_database_down_the_prompt_reaches_the_model_unchanged(installed, project):
    port = free_port()
    with ScriptedModel(reply) as scripted:
        env = {**installed, **scripted.env(), "FROBOZZ_DATABASE_URL": f"postgresql://x@127.0.0.1:{port}/none"}
        done = claude_p("What is my cat called?", env, project)
        assert done["result"] == "(scripted) noted"
        [request] = main_requests(scripted)
        assert "What is my cat called?" in said(request) and "Orientation" not in said(request)
        assert "recalled-memories" not in said(request)


async def test_the_session_end_archives_the_whole_transcript_with_its_tool_calls_and_secrets_redacted(
    installed, project, cortex_settings
):
    with ScriptedModel(reply) as scripted:
        env = {**installed, **scripted.env()}
        done = claude_p("run the check, please", env, project, "--allowedTools", "Bash")
        assert done["result"] == "(scripted) the check printed its line"
    service = MemoryService(cortex_settings)
    try:
        sessions = await service.sessions()
        key = {"project_key": project_key(project.resolve()), "session_id": done["session_id"]}
        transcripts = await TranscriptStore.on((await service.store()).pool)
        with anyio.fail_after(120):  # the daemon archives it in the background once claude has ended

            async def ready() -> object:
                return any(e.kind == "tool_result" for e in await sessions.transcript(done["session_id"]))

            await eventually(ready, interval=0.2)
        entries = await transcripts.load(key)
        text = json.dumps(entries)
        assert "run the check, please" in text and "the check printed its line" in text  # the turns
        assert '"tool_use"' in text and "echo checked-ok" in text and "checked-ok GITHUB_TOKEN=" in text  # the call
        assert '"tool_result"' in text  # and its result
        assert LEAKED not in text and "[REDACTED]" in text
        archived = {e.kind: e for e in await sessions.transcript(done["session_id"])}
        assert archived["tool_use"].content.startswith("Bash ") and "checked-ok" in archived["tool_result"].content
        assert all(LEAKED not in e.content for e in await sessions.transcript(done["session_id"]))
    finally:
        await service.aclose()
