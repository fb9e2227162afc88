"""The hub as a user sets it up: the real claude CLI with mcp-config/frobozz.json as shipped
(`frobozz` from PATH), each server a real stdio process; `frobozz mcp-config`; `serve all --http`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from frobozz.engine import Result, Session, SystemInit, UserMessage
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from frobozz.servers.forge.testing import FakeImageBackend
from tests.engine.conftest import of, until
from tests.httpserver import serve
from tests.ports import free_port

ROOT = Path(__file__).parents[2]
SERVERS = ["cortex", "fetch", "forge", "handoff", "game"]


def frobozz(*args, env=None, check=True):
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", *args], capture_output=True, text=True, timeout=120, env=env or os.environ
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.mark.anyio
async def test_claude_connects_all_five_servers_from_the_shipped_config_and_calls_one_tool_of_each(
    make_options, frobozz_env, cortex_settings
):
    with (
        serve(
            {"/page": (200, b"<html><title>Hub page</title><body><p>The hub fetched this.</p></body></html>")}
        ) as site,
        FakeImageBackend("sdwebui") as images,
    ):
        calls = [
            ToolUse("mcp__cortex__store", {"content": "Stored through the hub."}),
            ToolUse("mcp__fetch__fetch", {"url": f"{site}/page"}),
            ToolUse("mcp__forge__imagine", {"prompt": "a white house", "width": 64, "height": 64}),
            ToolUse("mcp__handoff__handoff", {"summary": "Every server answered."}),
            ToolUse("mcp__game__new_game", {"game": "zork1"}),
        ]

        def script(request):
            done = sum(
                1
                for m in request.messages
                for b in (m["content"] if isinstance(m["content"], list) else [])
                if b.get("type") == "tool_result"
            )
            if done == len(calls):
                return "All five answered."
            return Reply((Text(f"Calling {calls[done].name}."), calls[done]))

        env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `frobozz` as installed
            "FROBOZZ_DATA_DIR": str(frobozz_env),
            "FROBOZZ_GAMES_DIR": os.environ["FROBOZZ_GAMES_DIR"],
            "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
            "FROBOZZ_FETCH_ALLOW_PRIVATE": "true",
            "FROBOZZ_FETCH_RESPECT_ROBOTS": "false",
            "FROBOZZ_FORGE_URL": images.url,
            "FROBOZZ_FORGE_API_KEY": "sk-test",
        }
        async with ScriptedModel(script) as model:
            options = make_options(
                model,
                env=env,
                mcp_config=ROOT / "mcp-config" / "frobozz.json",
                strict_mcp_config=True,
                allowed_tools=[c.name for c in calls],
            )
            async with Session(options) as session:
                servers = await session.wait_for_mcp()
                await session.send("use one tool of each server")
                events = await until(session.events(), Result, timeout=180)
    init = of(events, SystemInit)[0]
    assert sorted(s.name for s in servers) == sorted(SERVERS) and all(s.tools for s in servers)
    assert {c.name for c in calls} <= set(init.tools)
    results = [r for u in of(events, UserMessage) for r in u.tool_results]
    assert len(results) == 5 and not [r.content for r in results if r.is_error]
    text = json.dumps([r.content for r in results])
    assert "The hub fetched this." in text and "West of House" in text and "handoff_id" in text
    assert of(events, Result)[-1].result == "All five answered."


def test_mcp_config_prints_writes_and_installs_a_config_for_this_install(tmp_path):
    printed = json.loads(frobozz("mcp-config", "--servers", "memory").stdout)
    assert list(printed["mcpServers"]) == ["cortex", "handoff"]
    assert printed["mcpServers"]["cortex"]["command"] == sys.executable
    frobozz("mcp-config", "--servers", "game,fetch", "--output", str(tmp_path / "mine.json"))
    assert list(json.loads((tmp_path / "mine.json").read_text())["mcpServers"]) == ["game", "fetch"]
    frobozz("mcp-config", "--servers", "game", "--output", str(tmp_path / "mine.json"))  # a config: written again
    assert list(json.loads((tmp_path / "mine.json").read_text())["mcpServers"]) == ["game"]
    notes = tmp_path / "notes.txt"
    notes.write_text("root:x:0:0:root:/root:/bin/bash\n")  # (-o /etc/passwd replaced it, run as root)
    refused = frobozz("mcp-config", "--output", str(notes), check=False)
    assert refused.returncode == 2 and "is not an MCP config" in " ".join(refused.stderr.split())
    assert notes.read_text() == "root:x:0:0:root:/root:/bin/bash\n"
    folder = frobozz("mcp-config", "-o", str(tmp_path), check=False)
    assert folder.returncode == 2 and "folder" in folder.stderr  # (a long path wraps the message in its box)
    project = tmp_path / "project"
    project.mkdir()
    frobozz("mcp-config", "--install", "--project", str(project))
    assert list(json.loads((project / ".mcp.json").read_text())["mcpServers"]) == SERVERS
    wrong = frobozz("mcp-config", "--servers", "cortex,telepathy", check=False)
    assert wrong.returncode == 2 and "telepathy" in wrong.stderr


def test_serve_all_needs_http_and_an_unknown_server_is_named():
    assert "needs --http" in frobozz("serve", "all", check=False).stderr
    assert "no server 'nope'" in frobozz("serve", "nope", check=False).stderr


async def healthy(port: int) -> None:
    """Until the hub on `port` answers its health check."""
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            await anyio.sleep(0.1)


@pytest.mark.anyio
async def test_serve_all_over_http_prints_a_generated_token_that_clients_and_the_web_view_then_use(
    tmp_path, frobozz_env, cortex_settings
):
    port = free_port()
    env = {**os.environ, "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value()}
    env.pop("FROBOZZ_HUB_TOKEN", None)
    every = None
    hub = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        token = link = None
        with anyio.fail_after(60):
            while token is None or link is None:
                line = await anyio.to_thread.run_sync(hub.stderr.readline)
                assert line, "the hub exited before printing its token"
                if "bearer token" in line:
                    token = line.rsplit(" ", 1)[1].strip()
                elif line.startswith("web view: "):
                    link = line.split(" ", 2)[2].strip()
                elif line.startswith("all of them: "):
                    every = line.split(": ", 1)[1].strip()
            await healthy(port)
        assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 401
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/cortex/mcp", http_client=client)) as mcp:
            stored = await mcp.call_tool("store", {"content": "Stored through serve all --http."})
        assert not stored.is_error
        assert link == f"http://127.0.0.1:{port}/?token={token}"
        with httpx.Client(follow_redirects=True, timeout=60) as browser:  # the web view, mounted at /
            assert "<h1>Runs</h1>" in browser.get(link).text
            assert "Stored through serve all --http." in browser.get(f"http://127.0.0.1:{port}/memory").text
        # the config for all five, as the banner says to make it
        made, used = every.split("; ")
        assert made.split()[:2] == ["frobozz", "mcp-config"] and made.endswith(" -o hub.json")
        assert used == "claude --mcp-config hub.json"
        frobozz(*made.split()[1:-1], str(tmp_path / "hub.json"))
        servers = json.loads((tmp_path / "hub.json").read_text())["mcpServers"]
        assert set(servers) == {"cortex", "fetch", "forge", "handoff", "game"}
        assert servers["game"]["url"] == f"http://127.0.0.1:{port}/game/mcp"
        assert servers["game"]["headers"]["Authorization"] == f"Bearer {token}"
    finally:
        hub.terminate()
        hub.wait(timeout=30)


def test_hub_token_makes_an_entry_the_hub_loads_and_a_bad_tokens_file_stops_serve(tmp_path):
    from frobozz.servers._grants import find_grant, load_grants

    made = frobozz("hub-token", "alice", "--server", "cortex", "--read", "team", "--write", "alice")
    secret = made.stderr.split(": ")[-1].split()[0]
    (tmp_path / "tokens.toml").write_text(made.stdout)
    [grant] = load_grants(tmp_path / "tokens.toml")
    assert secret not in made.stdout and find_grant([grant], secret) == grant
    assert (grant.name, grant.servers, grant.read, grant.write) == ("alice", ["cortex"], ["team"], ["alice"])
    assert "name: String should match" in frobozz("hub-token", "bad name!", check=False).stderr
    assert "no part 'bogus' to grant; known: " in frobozz("hub-token", "bob", "--server", "bogus", check=False).stderr
    alone = frobozz("hub-token", "bob", "--user", "bob", check=False)  # (its help said: with --server agent)
    assert alone.returncode == 2 and "add --server agent" in " ".join(alone.stderr.replace("│", " ").split())
    (tmp_path / "bad.toml").write_text("[[token]]\nname = 'x'\n")
    refused = frobozz("serve", "all", "--http", "--tokens", str(tmp_path / "bad.toml"), check=False)
    assert refused.returncode != 0 and "FROBOZZ_HUB_TOKENS" in refused.stderr


@pytest.mark.anyio
async def test_two_hubs_on_one_database_play_one_game_in_turns_to_its_end_and_serialise_concurrent_acts(
    tmp_path, frobozz_env, cortex_settings
):
    from frobozz.games import CATALOGUE, walkthrough_for

    ports = [free_port() for _ in range(2)]
    env = {
        **os.environ,
        "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
        "FROBOZZ_HUB_TOKEN": "two-hubs-one-database",
    }
    hubs = [
        subprocess.Popen(
            [sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", str(port)],
            stderr=subprocess.DEVNULL,
            env={**env, "FROBOZZ_DATA_DIR": str(tmp_path / f"machine{i}")},
        )
        for i, port in enumerate(ports)
    ]  # two machines: nothing shared but the database
    try:
        with anyio.fail_after(90):
            for port in ports:
                await healthy(port)
        headers = {"Authorization": "Bearer two-hubs-one-database"}
        async with (
            Client(
                streamable_http_client(
                    f"http://127.0.0.1:{ports[0]}/game/mcp",
                    http_client=httpx2.AsyncClient(headers=headers, timeout=120),
                )
            ) as one,
            Client(
                streamable_http_client(
                    f"http://127.0.0.1:{ports[1]}/game/mcp",
                    http_client=httpx2.AsyncClient(headers=headers, timeout=120),
                )
            ) as two,
        ):
            sid = (await one.call_tool("new_game", {"game": "zork1"})).structured_content["session_id"]
            state = {}
            for n, command in enumerate(walkthrough_for(CATALOGUE["zork1"].md5)):
                answer = await (two if n % 2 == 0 else one).call_tool("act", {"session_id": sid, "command": command})
                assert not answer.is_error, answer.content[0].text
                state = answer.structured_content
            assert (state["score"], state["won"]) == (350, True)

            sid = (await two.call_tool("new_game", {"game": "zork1"})).structured_content["session_id"]
            moves = []

            async def wait(client):
                moves.append(
                    (await client.call_tool("act", {"session_id": sid, "command": "wait"})).structured_content["moves"]
                )

            async with anyio.create_task_group() as tg:
                for n in range(10):
                    tg.start_soon(wait, (one, two)[n % 2])
            assert sorted(moves) == [3 * n for n in range(1, 11)]  # one after another, never from the same state
    finally:
        for hub in hubs:
            hub.terminate()
        for hub in hubs:
            hub.wait(timeout=30)
