"""The agent service on the real claude CLI, a scripted model that calls tools, and the real Postgres."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from frobozz.agent import Agent, AgentSettings
from frobozz.engine import EngineOptions
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from tests.conftest import other_accounts_can_run_claude

# as root, claude runs as each workspace's owner: where no other account can reach this checkout's claude, the
# tests run it as root instead (and the accounts' own tests are skipped)
ACCOUNTS = None if other_accounts_can_run_claude() or os.geteuid() != 0 else False
QUESTION = {
    "questions": [
        {
            "question": "Which colour for the lamp?",
            "header": "Colour",
            "multiSelect": False,
            "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
        }
    ]
}


def model_reply(request):
    """The scripted model: what the last user message asks for, with a tool where it says so; after a tool
    result, what the result said."""
    results = request.tool_results()
    if results:
        return "The tool said: " + " ".join(str(r.get("content")) for r in results)[:300]
    said = request.last_user_text().strip().rsplit("\n", 1)[-1]
    last = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
    images = sum(1 for b in last if isinstance(b, dict) and b.get("type") == "image") if isinstance(last, list) else 0
    if images:
        return f"I see {images} image(s). You said: {said}"
    if said.startswith("write "):  # "write PATH: TEXT"
        path, _, content = said[len("write ") :].partition(": ")
        return Reply((ToolUse("Write", {"file_path": path, "content": content}),))
    if said.startswith("run "):
        return Reply((ToolUse("Bash", {"command": said[len("run ") :]}),))
    if said == "ask me":
        return Reply((ToolUse("AskUserQuestion", QUESTION),))
    if said in ("slowly", "very slowly"):  # (very: seconds, for a test that does two things while it streams)
        return Reply(
            (Text("one two three four five six seven eight nine ten " * (60 if said[0] == "v" else 6)),), delay=0.05
        )
    if said == "what came before?":
        return "Before: " + json.dumps(request.messages)[:4000]
    return Reply((Text(f"You said: {said}. " + "And a longer answer so that it streams in pieces. " * 3),))


@pytest.fixture
async def scripted():
    async with ScriptedModel(model_reply) as model:
        yield model


@pytest.fixture
def roots(open_dir: Path) -> tuple[Path, Path]:
    root, platform = open_dir / "workspaces", open_dir / "platform"
    root.mkdir()
    platform.mkdir()
    return root, platform


@pytest.fixture
def make_agent(scripted, roots, cortex_settings, claude_home):
    def make(home: Path | None = None, memory_servers=None, **settings) -> Agent:
        """`warm_spare` is off unless a test asks for it (the spare's own tests, in test_lifecycle.py): a spare
        nobody takes is a claude started, rehearsed and closed for nothing, twice a test."""
        settings.setdefault("warm_spare", False)
        root, platform = roots
        env = {**scripted.env(), "HOME": str(home or claude_home), "CLAUDE_CODE_MAX_RETRIES": "0"}
        return Agent(
            AgentSettings(workspaces=root, platform_dir=platform, **settings),
            engine_options=EngineOptions(env=env),
            memory=cortex_settings,
            memory_servers=memory_servers,
            accounts=ACCOUNTS,
        )

    return make


@pytest.fixture
async def agent(make_agent):
    async with make_agent() as running:
        yield running
