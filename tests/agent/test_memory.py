"""A session with `memory: {namespace}`: the memory loop around its claude (orientation with what the namespace
remembers, the archive of what was said, the loop's session kept with the agent's and resumed after a restart),
the memory servers it gets storing into its namespace, bad memory options refused with nothing made, and a
scoped token that may not write to the namespace refused."""

import base64
import json

import anyio
import httpx
import pytest

from frobozz._loopback import LoopbackServer
from frobozz.agent import Done, InputError, create_app
from tests.agent.test_agent import turn
from tests.agent.test_images import images_in, png
from tests.conftest import python_for_any_account
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
LAMP = "The brass lantern is kept in the trophy case."


def primary_texts(scripted):
    """What the session's claude was sent (the sidecar's prompts are the loop's own, told apart by their text)."""
    return [
        r.last_user_text()
        for r in scripted.requests
        if not r.last_user_text().startswith(("Write up to", "Here is the last exchange"))
    ]


async def test_with_memory_on_the_first_message_is_oriented_the_words_archived_and_a_restart_resumes_the_loop(
    make_agent, memory_service, tmp_path, scripted
):
    await (await memory_service.store()).store(LAMP, namespace="house")
    async with make_agent() as agent:
        session = await agent.create_session("alice/notes", memory={"namespace": "house"})
        events = await turn(agent, session, "Where is the lantern?")
        assert isinstance(events[-1], Done) and not events[-1].is_error
        described = (await agent.session(session)).describe()
    first = primary_texts(scripted)[-1]
    assert first.startswith("# Orientation") and LAMP in first and first.endswith("Where is the lantern?")
    loop_id = described["memory"]["session"]
    assert described["memory"]["namespace"] == "house" and loop_id
    elsewhere = tmp_path / "another-home"
    elsewhere.mkdir()
    async with make_agent(home=elsewhere) as agent:  # the service restarted, on another HOME
        assert (await agent.sessions())[0]["memory"] == {"namespace": "house", "session": loop_id}
        events = await turn(agent, session, "what came before?")
    assert "Where is the lantern?" in events[-1].result  # claude resumed its session
    sessions = await memory_service.sessions()
    words = [e.content for e in await sessions.transcript(loop_id) if e.kind == "user"]
    assert words == ["Where is the lantern?", "what came before?"]  # one loop session, both turns archived
    assert (await sessions.get(loop_id)).namespace == "house"


async def test_the_memory_servers_start_with_the_sessions_namespace(make_agent, open_dir):
    marker = open_dir / "drop" / "memory-server.json"
    python = python_for_any_account()
    probe = (
        "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps("
        "{'namespace': os.environ.get('FROBOZZ_CORTEX_DEFAULT_NAMESPACE')}))"
    )

    def servers(namespace):
        return {
            "cortex": {
                "command": python,
                "args": ["-c", probe, str(marker)],
                "env": {"FROBOZZ_CORTEX_DEFAULT_NAMESPACE": namespace},
            }
        }

    async with make_agent(memory_servers=servers) as agent:
        session = await agent.create_session("alice/notes", memory={"namespace": "garden"})
        await turn(agent, session, "hello")
        with anyio.fail_after(30):
            await eventually(lambda: marker.exists() and marker.read_text())
    assert json.loads(marker.read_text()) == {"namespace": "garden"}


async def test_a_bad_memory_option_is_refused_and_nothing_is_made(agent, roots):
    for bad in (
        "house",
        {"namespace": ""},
        {"namespace": "../up"},
        {"namespace": "x" * 500},
        {"name": "house"},
        {"namespace": "house", "extra": 1},
        {"namespace": 7},
    ):
        with pytest.raises(InputError):
            await agent.create_session("alice/notes", memory=bad)
    assert await agent.sessions() == [] and not (roots[0] / "alice").exists()


async def test_a_token_that_may_not_write_the_namespace_gets_403_and_one_that_may_gets_a_session(make_agent):
    from frobozz.servers._auth import ScopedTokens
    from frobozz.servers._grants import Grant, hashed

    grants = [
        Grant(
            name="app",
            sha256=hashed("app-token-0123456789ab"),
            servers=["agent"],
            users=["*"],
            write=["house"],
            read=["garden"],
        )
    ]
    server = LoopbackServer(ScopedTokens(create_app(make_agent()), grants, frozenset(), only="agent"), lifespan="on")
    with server:
        async with httpx.AsyncClient(
            base_url=server.url, timeout=60, headers={"Authorization": "Bearer app-token-0123456789ab"}
        ) as client:
            refused = await client.post(
                "/sessions", json={"workspace": "alice/notes", "memory": {"namespace": "garden"}}
            )
            assert refused.status_code == 403 and "garden" in refused.json()["error"]
            bad = await client.post("/sessions", json={"workspace": "alice/notes", "memory": "house"})
            assert bad.status_code == 400 and "namespace" in bad.json()["error"]
            made = await client.post("/sessions", json={"workspace": "alice/notes", "memory": {"namespace": "house"}})
            assert made.status_code == 201
            described = (await client.get(f"/sessions/{made.json()['session_id']}")).json()
            assert described["memory"] == {"namespace": "house", "session": None}  # the loop begins with a message


async def image_turn(make_agent, text: str | None, picture: bytes) -> str:
    """One turn of a new session with memory on (namespace house), of `text` and the image; its loop session."""
    async with make_agent() as agent:
        session = await agent.create_session("alice/pictures", memory={"namespace": "house"})
        live = await agent.session(session)
        after = live.relay.last_seq
        await agent.post_message(
            live, text, images=[{"media_type": "image/png", "data": base64.b64encode(picture).decode()}]
        )
        with anyio.fail_after(120):
            async for logged in live.relay.follow(after):
                if isinstance(logged.event, Done):
                    break
        assert not logged.event.is_error and logged.event.result.startswith("I see 1 image(s)")
        return live.describe()["memory"]["session"]


async def test_with_memory_on_a_message_with_an_image_is_archived_with_the_image_noted_and_reaches_the_model(
    make_agent, memory_service, scripted
):

    picture = png(3, 2)
    loop_id = await image_turn(make_agent, "what is in this?", picture)
    request = [r for r in scripted.requests if images_in(r)][-1]
    assert base64.b64decode(images_in(request)[0]["source"]["data"]) == picture
    assert request.last_user_text().startswith("# Orientation")  # memory's blocks went before the text and image
    words = [e for e in await (await memory_service.sessions()).transcript(loop_id) if e.kind == "user"]
    assert [e.content for e in words] == [f"what is in this?\n[image: image/png, {len(picture)} bytes]"]
    assert words[0].data["images"] == [{"media_type": "image/png", "bytes": len(picture)}]


async def test_with_memory_on_a_message_of_an_image_alone_sends_no_empty_text_and_is_archived_as_the_image(
    make_agent, memory_service, scripted
):
    """The API refuses an empty text block: memory's blocks go first, then the image, and no text of the user's."""
    picture = png(2, 3)
    loop_id = await image_turn(make_agent, None, picture)
    request = [r for r in scripted.requests if images_in(r)][-1]
    last = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
    assert all(b.get("text", "x").strip() for b in last if b.get("type") == "text")
    words = [e for e in await (await memory_service.sessions()).transcript(loop_id) if e.kind == "user"]
    assert [e.content for e in words] == [f"[image: image/png, {len(picture)} bytes]"]


async def test_with_the_frobozz_plugin_installed_a_memory_turn_starts_no_plugin_daemon_and_archives_one_session(
    scripted, roots, cortex_settings, claude_home, frobozz_env, memory_service, monkeypatch
):
    """The agent runs the memory loop around a session's claudes, as chat does: the Frobozz plugin the service's
    account installed in Claude Code ran it again in them (its daemon started, and one turn archived the session,
    the sidecar's question and the orientation as more sessions of the plugin's own)."""
    import os
    import subprocess
    import sys

    from frobozz.agent import Agent, AgentSettings
    from frobozz.engine import EngineOptions
    from frobozz.plugin import PluginSettings, daemon_pid, stop_daemon

    database = cortex_settings.database_url.get_secret_value()
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", database)  # the plugin's daemon, if one starts, on the same database
    installed = subprocess.run(
        [sys.executable, "-m", "frobozz", "plugin", "install"],
        env={**os.environ, "HOME": str(claude_home)},
        cwd=claude_home,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert installed.returncode == 0, installed.stderr
    socket = PluginSettings(data_dir=frobozz_env).socket
    root, platform = roots
    env = {**scripted.env(), "HOME": str(claude_home), "CLAUDE_CODE_MAX_RETRIES": "0"}
    agent = Agent(  # claude as the service's own account, in the HOME the plugin is installed in
        AgentSettings(workspaces=root, platform_dir=platform, warm_spare=False),
        engine_options=EngineOptions(env=env),
        memory=cortex_settings,
        accounts=False,
    )
    try:
        async with agent:
            session = await agent.create_session("alice/notes", memory={"namespace": "plugged"})
            events = await turn(agent, session, "hello")
            assert isinstance(events[-1], Done) and not events[-1].is_error
            loop_id = (await agent.session(session)).describe()["memory"]["session"]
        assert daemon_pid(socket) is None
        sessions = await memory_service.sessions()
        assert await sessions.namespaces() == ["plugged"]
        assert [e.content for e in await sessions.transcript(loop_id) if e.kind == "user"] == ["hello"]
    finally:
        stop_daemon(socket)
