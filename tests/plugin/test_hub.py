"""The hooks calling a running hub (`frobozz serve all --http`, `frobozz plugin install --hub`) instead of a
daemon of their own: recall from the hub with its token; a wrong token or a hub that is down lets the
prompt through and says why once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from frobozz._children import dying_with_parent
from frobozz.memory import MemoryService
from frobozz.plugin import PluginSettings, daemon_pid
from tests.ports import free_port

from .conftest import frobozz, hook, hook_env
from .test_hook import payload

pytestmark = pytest.mark.anyio
TOKEN = "hub-token-for-the-plugin-test"


@pytest.fixture
def hub(claude_home: Path, cortex_settings, frobozz_env: Path, embedder_ready: None) -> Iterator[str]:
    port = free_port()
    env = {**hook_env(claude_home, cortex_settings), "FROBOZZ_HUB_TOKEN": TOKEN}
    process = subprocess.Popen(
        dying_with_parent([sys.executable, "-m", "frobozz", "serve", "all", "--http", "--port", str(port)]),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            portal.call(_healthy, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


async def _healthy(port: int) -> None:
    with anyio.fail_after(180):
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await anyio.sleep(0.2)


async def test_the_hooks_recall_from_the_hub_and_start_no_daemon(
    hub, claude_home, cortex_settings, project, plugin_settings: PluginSettings
):
    service = MemoryService(cortex_settings)
    try:
        await (await service.store()).store("The release train leaves on Thursdays.", namespace="myproject")
    finally:
        await service.aclose()
    env = hook_env(claude_home, cortex_settings)
    done = frobozz("plugin", "install", "--hub", hub + "/", env=env, cwd=project)
    assert done.returncode == 0 and hub in done.stdout, done.stderr
    assert hub in frobozz("plugin", "status", env=env, cwd=project).stdout
    ask = payload(project, "UserPromptSubmit", prompt="When does the release train leave?")
    out = hook("UserPromptSubmit", ask, {**env, "FROBOZZ_HUB_TOKEN": TOKEN}, plugin_settings)
    assert "Thursdays" in out["hookSpecificOutput"]["additionalContext"]
    assert hook("UserPromptSubmit", ask, {**env, "FROBOZZ_HUB_TOKEN": TOKEN}, plugin_settings) == {}  # seen
    assert daemon_pid(plugin_settings.socket) is None  # the hub answered: no daemon was started

    wrong = hook(
        "UserPromptSubmit", {**ask, "session_id": "s-2"}, {**env, "FROBOZZ_HUB_TOKEN": "wrong"}, plugin_settings
    )
    assert "hookSpecificOutput" not in wrong and "refused the token" in wrong["systemMessage"]
    assert TOKEN not in wrong["systemMessage"] and "wrong" not in wrong["systemMessage"]


def test_a_hub_that_is_down_lets_the_prompt_through_and_says_why(
    claude_home, cortex_settings, project, plugin_settings, embedder_ready
):
    env = hook_env(claude_home, cortex_settings)
    assert (
        frobozz("plugin", "install", "--hub", f"http://127.0.0.1:{free_port()}", env=env, cwd=project).returncode == 0
    )
    out = hook("UserPromptSubmit", payload(project, "UserPromptSubmit", prompt="hi"), env, plugin_settings)
    assert "hookSpecificOutput" not in out and "hub cannot be reached" in out["systemMessage"]
    assert daemon_pid(plugin_settings.socket) is None


def test_a_hub_address_that_is_not_http_is_refused_and_nothing_is_installed(
    claude_home, cortex_settings, project, plugin_settings
):
    env = hook_env(claude_home, cortex_settings)
    for bad in ["ftp://127.0.0.1", "127.0.0.1:8765", "http://u:p@127.0.0.1:1", "http://127.0.0.1:1/?token=x", ""]:
        done = frobozz("plugin", "install", "--hub", bad, env=env, cwd=project)
        assert done.returncode == 2 and "--hub" in done.stderr, bad
    assert not (plugin_settings.plugin_dir / "installed.json").exists()
    assert os.listdir(claude_home) == [] or not (claude_home / ".claude" / "settings.json").exists()
