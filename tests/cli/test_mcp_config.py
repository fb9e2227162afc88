"""`frobozz mcp-config --url`: a config for the servers of a hub served over HTTP (`serve all --http`), as the
real claude CLI uses it, and what it refuses."""

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest

from frobozz.engine import Result, Session, SystemInit, UserMessage
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from tests.cli.in_process import frobozz_here
from tests.cli.test_hub import frobozz, healthy
from tests.engine.conftest import of, until
from tests.ports import free_port

SERVERS = ["cortex", "fetch", "forge", "handoff", "game"]
TOKEN = "a-hub-token-for-the-mcp-config-tests"


@contextmanager
def hub(cortex_settings) -> Iterator[str]:
    """`frobozz serve all --http` on a loopback port, on the test's database: its address."""
    port = free_port()
    env = {
        **os.environ,
        "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
        "FROBOZZ_HUB_TOKEN": TOKEN,
    }
    served = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", str(port)],
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        served.terminate()
        served.wait(timeout=30)


def calling(*calls: ToolUse, answer: str):
    """A model that makes `calls` one after another, each once its last result is back, then says `answer`."""

    def script(request):
        done = sum(
            1
            for m in request.messages
            for b in (m["content"] if isinstance(m["content"], list) else [])
            if b.get("type") == "tool_result"
        )
        return answer if done == len(calls) else Reply((Text(f"Calling {calls[done].name}."), calls[done]))

    return script


@pytest.mark.anyio
async def test_claude_reaches_every_server_of_a_hub_over_http_with_the_config_mcp_config_writes(
    tmp_path, make_options, cortex_settings
):
    config = tmp_path / "hub.json"
    with hub(cortex_settings) as url:
        frobozz("mcp-config", "--url", url, "--token", TOKEN, "--output", str(config))
        with anyio.fail_after(90):
            await healthy(int(url.rsplit(":", 1)[1]))
        new_game = ToolUse("mcp__game__new_game", {"game": "zork1"})
        async with ScriptedModel(calling(new_game, answer="The hub answered.")) as model:
            options = make_options(model, mcp_config=config, strict_mcp_config=True, allowed_tools=[new_game.name])
            async with Session(options) as session:
                servers = await session.wait_for_mcp()
                await session.send("start a game on the hub")
                events = await until(session.events(), Result, timeout=180)
    assert {s.name: s.status for s in servers} == dict.fromkeys(SERVERS, "connected")
    assert all(s.tools for s in servers)
    [result] = [r for u in of(events, UserMessage) for r in u.tool_results]
    assert not result.is_error and "West of House" in json.dumps(result.content)
    assert of(events, Result)[-1].result == "The hub answered."


@pytest.mark.anyio
async def test_a_letter_written_over_http_carries_the_session_id_claude_was_started_with(
    tmp_path, make_options, cortex_settings
):
    """claude gives HTTP servers no session id of its own; started with `--session-id ID` and FROBOZZ_SESSION_ID=ID,
    it sends the id the config's handoff headers name. The token, left out of the file, is read from its
    environment too."""
    config = tmp_path / "hub.json"
    session_id = str(uuid.uuid4())
    with hub(cortex_settings) as url:
        frobozz("mcp-config", "--url", url, "--servers", "memory", "--output", str(config))
        assert TOKEN not in config.read_text()
        with anyio.fail_after(90):
            await healthy(int(url.rsplit(":", 1)[1]))
        calls = (
            ToolUse("mcp__handoff__handoff", {"summary": "Handed off over HTTP."}),
            ToolUse("mcp__handoff__latest_handoff", {}),
        )
        async with ScriptedModel(calling(*calls, answer="Read it back.")) as model:
            options = make_options(
                model,
                env={"FROBOZZ_HUB_TOKEN": TOKEN, "FROBOZZ_SESSION_ID": session_id},
                session_id=session_id,
                mcp_config=config,
                strict_mcp_config=True,
                allowed_tools=[c.name for c in calls],
            )
            async with Session(options) as session:
                await session.wait_for_mcp()
                await session.send("hand off, then read the letter back")
                events = await until(session.events(), Result, timeout=180)
    assert of(events, SystemInit)[0].session_id == session_id
    written, latest = [r for u in of(events, UserMessage) for r in u.tool_results]
    assert not written.is_error and not latest.is_error, (written.content, latest.content)
    letter = json.loads(latest.content[0]["text"] if isinstance(latest.content, list) else latest.content)["handoff"]
    assert (letter["summary"], letter["session_id"]) == ("Handed off over HTTP.", session_id)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--url", ""], "is not an http:// or https:// address"),
        (["--url", "127.0.0.1:8765"], "is not an http:// or https:// address"),
        (["--url", "file:///etc/passwd"], "is not an http:// or https:// address"),
        (["--url", "http://127.0.0.1:8765/game/mcp"], "one server's endpoint"),
        (["--url", "http://127.0.0.1:8765", "--token", "short"], "16 characters"),
        (["--token", TOKEN], "give its address with --url"),
        (["--url", "http://127.0.0.1:8765", "--token", TOKEN, "--install"], "often shared"),
        (["--url", "http://127.0.0.1:8765", "--namespace", "two words"], "invalid namespace"),
        (["--namespace", "team"], "give its address with --url"),
    ],
)
def test_a_bad_hub_address_or_token_is_refused_with_a_reason_and_nothing_is_written(tmp_path, monkeypatch, args, said):
    out = tmp_path / "hub.json"
    done = frobozz_here(
        dict(os.environ), monkeypatch, "mcp-config", *args, "--output", str(out), "--project", str(tmp_path), code=2
    )
    assert said in " ".join(done.output.replace("│", " ").split())
    assert not out.exists() and not (tmp_path / ".mcp.json").exists()


def test_a_hub_config_with_a_namespace_sends_it_to_cortex_and_handoff(tmp_path, monkeypatch):
    out = tmp_path / "hub.json"
    frobozz_here(
        dict(os.environ),
        monkeypatch,
        "mcp-config",
        "--url",
        "http://127.0.0.1:8765",
        "--namespace",
        "team",
        "--output",
        str(out),
    )
    servers = json.loads(out.read_text())["mcpServers"]
    assert {n: s["headers"].get("X-Frobozz-Namespace") for n, s in servers.items()} == {
        "cortex": "team",
        "fetch": None,
        "forge": None,
        "handoff": "team",
        "game": None,
    }


def test_a_missing_or_non_folder_output_folder_or_project_is_refused_and_nothing_is_made(tmp_path, monkeypatch):
    """`--output /nonexistent/x.json` and `--install --project /nonexistent` made /nonexistent; `--output
    /etc/passwd/x` said "File exists"."""
    env = {**os.environ, "COLUMNS": "500"}  # (the paths whole, on one line)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    for args, said in (
        (["--output", str(tmp_path / "none" / "deeper" / "x.json")], "does not exist"),
        (["--install", "--project", str(tmp_path / "none")], "does not exist"),
        (["--output", str(a_file / "x.json")], f"{a_file} is not a folder"),
        (["--output", str(a_file / "deeper" / "x.json")], f"{a_file} is a file"),
        (["--install", "--project", str(a_file)], f"{a_file} is not a folder"),
    ):
        refused = frobozz_here(env, monkeypatch, "mcp-config", *args, code=2)
        assert said in refused.stderr.replace("│", " ") and "File exists" not in refused.stderr, (args, refused.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"] and a_file.read_text() == "not a folder\n"
    frobozz_here(env, monkeypatch, "mcp-config", "--output", str(tmp_path / "x.json"))  # a folder that is there
    assert "mcpServers" in json.loads((tmp_path / "x.json").read_text())
