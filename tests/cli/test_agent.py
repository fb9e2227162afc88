"""`frobozz serve agent` as a user runs it: killed with -9 mid-turn, it leaves no claude, no MCP server and no
embedded Postgres behind."""

import os
import subprocess
import sys

import anyio
import httpx
import pytest

from frobozz.engine.testing import ScriptedModel
from tests.agent.conftest import model_reply
from tests.conftest import other_accounts_can_run_claude
from tests.orphans import descendants, still_running
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
TOKEN = "an-agent-token-long-enough"


@pytest.mark.skipif(
    os.geteuid() == 0 and not other_accounts_can_run_claude(),
    reason="run as root, the service runs claude as the workspace's owner, who cannot reach this checkout's claude",
)
async def test_the_agent_service_killed_with_sigkill_mid_turn_takes_its_claude_and_postgres_with_it(
    frobozz_env, claude_home, open_dir
):
    port = free_port()
    async with ScriptedModel(model_reply) as model:
        env = {**os.environ, **model.env(), "HOME": str(claude_home), "FROBOZZ_HUB_TOKEN": TOKEN}
        env.pop("FROBOZZ_DATABASE_URL", None)  # the embedded default, as on a fresh install
        service = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "frobozz",
                "serve",
                "agent",
                "--workspaces",
                str(open_dir / "ws"),
                "--port",
                str(port),
            ],
            stderr=subprocess.DEVNULL,
            env=env,
        )
        postmaster = frobozz_env / "postgres" / "postmaster.pid"
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}
            ) as client:
                with anyio.fail_after(60):
                    while True:
                        try:
                            if (await client.get("/sessions")).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await anyio.sleep(0.1)
                    session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
                    await client.post(f"/sessions/{session}/messages", json={"text": "slowly"})

                    async def ready() -> object:
                        return (await client.get(f"/sessions/{session}")).json()["status"] == "streaming"

                    await eventually(ready)
            children = descendants(service.pid)
            assert any("claude" in " ".join(p.cmdline()) for p in children) and postmaster.exists()
        finally:
            service.kill()
            service.wait()
        assert still_running(children, within=5) == []
        with anyio.fail_after(15):
            await eventually(lambda: not postmaster.exists(), interval=0.1)


def test_sessions_with_memory_get_cortex_on_their_namespace_but_not_from_a_root_service(monkeypatch):
    from frobozz.cli._serve import _memory_servers

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert _memory_servers() is None  # claude runs as each workspace's owner: no database password for it
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    servers = _memory_servers()("garden")
    assert list(servers) == ["cortex"] and servers["cortex"]["args"][-2:] == ["serve", "cortex"]
    assert servers["cortex"]["env"]["FROBOZZ_CORTEX_DEFAULT_NAMESPACE"] == "garden"
