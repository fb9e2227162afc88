"""The MCP project's own conformance suite (`@modelcontextprotocol/conformance`, installed by
scripts/bootstrap with the Node 22 it needs) against each of the five servers, served as `serve all --http`
serves them: stateless streamable HTTP behind the hub's token. The suite cannot send a header, so a small
ASGI layer in front of the hub adds the token (the hub still checks it). What the suite may fail is in
`conformance/expected-failures.yml`, each with its reason (the same for all five); a scenario that starts
passing fails the test too (the suite's own rule), so the file stays true."""

import logging
import os
import subprocess
from pathlib import Path

import pytest

from frobozz._loopback import LoopbackServer
from frobozz.servers import SERVERS
from frobozz.servers._http import hub_app, new_token
from frobozz.servers.forge.testing import FakeImageBackend

HERE = Path(__file__).parent / "conformance"
SUITE = Path(__file__).parents[2] / ".venv" / "conformance" / "node_modules" / ".bin"
TOKEN = new_token()


def with_token(app, token: str):
    """The header-adding proxy: every request reaches the hub carrying the token, as a real client's would."""
    header = (b"authorization", f"Bearer {token}".encode())

    async def proxy(scope, receive, send):
        if scope["type"] == "http":
            scope = {**scope, "headers": [*scope["headers"], header]}
        await app(scope, receive, send)

    return proxy


@pytest.fixture(scope="module")
def hub(postgres, tmp_path_factory):
    """All five servers in one hub, on a database and data folder of their own, for the module."""
    from tests.conftest import database_url

    postgres.psql("CREATE DATABASE conformance;")
    url = database_url(postgres, "conformance")
    data = tmp_path_factory.mktemp("conformance-data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FROBOZZ_DATA_DIR", str(data))
        ours = logging.getLogger("frobozz")  # the suite's requests lower it while in flight: put back after, whatever
        env.setattr(ours, "level", ours.level)
        with (
            FakeImageBackend("sdwebui") as backend,
            LoopbackServer(
                with_token(
                    hub_app(
                        list(SERVERS),
                        TOKEN,
                        forge={"forge_url": backend.url},
                        cortex={"database_url": url},
                        handoff={"database_url": url, "session_id": "conformance"},
                    ),
                    TOKEN,
                ),
                lifespan="on",
            ) as server,
        ):
            yield server


@pytest.mark.parametrize("name", list(SERVERS))
def test_the_official_conformance_suite_passes_but_for_its_expected_failures(hub, name, tmp_path):
    assert (SUITE / "conformance").exists(), "the conformance suite is missing: run scripts/bootstrap (bin/test does)"
    env = {**os.environ, "PATH": f"{SUITE}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [
            str(SUITE / "conformance"),
            "server",
            "--url",
            f"{hub.url}/{name}/mcp",
            "--expected-failures",
            str(HERE / "expected-failures.yml"),
            "-o",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"


@pytest.mark.anyio
@pytest.mark.parametrize("mode, version", [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_every_server_answers_the_current_and_the_previous_protocol_version_over_the_hub(hub, mode, version):
    """2026-07-28 by server/discover on stateless HTTP (what a client tries first), 2025-11-25 by the handshake."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    for name in SERVERS:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
        async with Client(streamable_http_client(f"{hub.url}/{name}/mcp", http_client=http), mode=mode) as client:
            assert client.protocol_version == version, name
            capabilities = client.server_capabilities
            assert None not in (capabilities.completions, capabilities.logging, capabilities.prompts), name
            assert (await client.list_prompts()).prompts, name
