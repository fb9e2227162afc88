"""Interactive claude in a pseudo-terminal, as a person uses it, with the plugin installed: the stored
memory recalled on the first prompt and not again on the next, then /compact followed by the letter."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import anyio
import pexpect
import pytest

from frobozz.engine import find_claude
from frobozz.engine.testing import ScriptedModel
from frobozz.memory import MemoryService
from tests.waiting import eventually

from .conftest import hook
from .test_claude import LETTER, said

pytestmark = pytest.mark.anyio
READY = re.compile(r"for.{0,16}agents")  # the input box's footer: the prompt may be typed


def person_ready(home: Path, project: Path, key: str) -> None:
    """What a person has done once in their own claude: onboarding, the project trusted, the API key approved."""
    path = home / ".claude.json"
    config = json.loads(path.read_text()) if path.exists() else {}
    config.update(
        {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
            "projects": {str(project): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
        }
    )
    path.write_text(json.dumps(config))


def replies(request) -> str:  # type: ignore[no-untyped-def]
    """Each answer one word, named for the prompt's first (the terminal draws spaces as cursor moves)."""
    text = request.last_user_text()
    if text.startswith("The conversation below is about to be compacted"):
        return f"{LETTER}\n- tell the vet"
    if text.startswith(("Here is the last exchange", "Summarise")):
        return "NONE"
    return f"(scripted)ANSWER-{text.rsplit(chr(10), 1)[-1].split(' ')[0].upper()}"


def conversation(scripted: ScriptedModel) -> list:
    return [
        r
        for r in scripted.requests
        if r.body.get("tools")
        and "ANSWER" not in r.last_user_text()
        and not r.last_user_text().startswith(("The conversation below", "Here is the last", "Summarise"))
    ]


async def opened(cortex_settings) -> None:
    service = MemoryService(cortex_settings)
    try:
        sessions = await service.sessions()
        with anyio.fail_after(60):

            async def ready() -> object:
                return await sessions.list("myproject")

            await eventually(ready)
    finally:
        await service.aclose()


def ask(child: pexpect.spawn, text: str, answer: str) -> None:
    child.send(text)
    child.send("\r")
    child.expect_exact(answer)


async def test_a_person_at_the_terminal_gets_the_memory_once_and_the_letter_after_compact(
    installed,
    memories,
    project,
    claude_home,
    plugin_settings,
    cortex_settings,
):
    with ScriptedModel(replies) as scripted:
        env = {**installed, **scripted.env(), "COLUMNS": "120", "TERM": "xterm"}
        person_ready(claude_home, project, scripted.env()["ANTHROPIC_API_KEY"])
        # the daemon up, as a person's is after their first session (the cold start is claude -p's test)
        hook("ping", {"session_id": "warm-up"}, env, plugin_settings)
        child = pexpect.spawn(
            str(find_claude()), [], env=env, cwd=str(project), encoding="utf-8", timeout=120, dimensions=(40, 120)
        )
        child.logfile_read = (project.parent / "screen.log").open("w")
        try:
            child.expect(READY)
            await opened(cortex_settings)  # the session's orientation is being written: a person would type now
            ask(child, "What is my cat called?", "ANSWER-WHAT")
            first = next(r for r in conversation(scripted) if "my cat called" in r.last_user_text())
            assert "# Orientation" in said(first) and "<recalled-memories>" in said(first) and "Zorkmid" in said(first)
            ask(child, "Is she afraid of anything?", "ANSWER-IS")
            second = conversation(scripted)[-1]
            assert said(second).count("<recalled-memories>") == 1  # the first turn's, in the history only
            child.send("/compact")
            child.send("\r")
            child.expect("Compacted")
            ask(child, "Where were we?", "ANSWER-WHERE")
            after = conversation(scripted)[-1]
            assert "Hand-off letter" in said(after) and LETTER in said(after)
            child.send("/exit")
            child.send("\r")
            child.expect(pexpect.EOF)
        finally:
            if child.isalive():
                child.kill(signal.SIGKILL)
                child.wait()
