"""The hooks calling a running hub (`frobozz serve all --http`, `frobozz plugin install --hub`) instead of a
daemon of their own: recall from the hub with its token; a wrong token or a hub that is down lets the
prompt through and says why once."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from frobozz._children import dying_with_parent
from frobozz.engine.testing import ScriptedModel
from frobozz.memory import MemoryService
from frobozz.plugin import PluginSettings, daemon_pid
from tests.ports import free_port

from .conftest import _plugin_env, frobozz, hook, hook_env
from .test_claude import DOG, STORE, claude_p, main_requests, reply, said
from .test_hook import payload

pytestmark = pytest.mark.anyio
TOKEN = "hub-token-for-the-plugin-test"


HUBS_OWN = "hubs-own"  # the hub's default namespace (FROBOZZ_CORTEX_DEFAULT_NAMESPACE where it runs)


@pytest.fixture
def hub(claude_home: Path, cortex_settings, frobozz_env: Path, embedder_ready: None) -> Iterator[str]:
    env = {**hook_env(claude_home, cortex_settings), "FROBOZZ_HUB_TOKEN": TOKEN}
    with serving_hub({**env, "FROBOZZ_CORTEX_DEFAULT_NAMESPACE": HUBS_OWN}) as url:
        yield url


@contextmanager
def serving_hub(env: dict[str, str]) -> Iterator[str]:
    """`frobozz serve all --http` with `env` (its token in it), until the block ends: its address."""
    port = free_port()
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
    """Installed without --namespace, the hooks work in the hub's default namespace (the one its cortex stores in
    when the model names none), not in one made from the project's folder (a path on claude's machine)."""
    service = MemoryService(cortex_settings)
    try:
        await (await service.store()).store("The release train leaves on Thursdays.", namespace=HUBS_OWN)
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


@pytest.mark.parametrize("namespace", ["hub-team", None])
async def test_with_a_hub_what_the_model_stores_is_kept_by_the_hub_and_recalled_and_no_daemon_starts(
    claude_home, cortex_settings, project, plugin_settings: PluginSettings, embedder_ready, namespace
):
    """The plugin's cortex is the hub's own (over HTTP, its token from claude's environment), in the namespace the
    hooks use: installed with --namespace, that one (sent as X-Frobozz-Namespace, whatever the hub's default);
    without, the hub's default (not one made from the project's folder, here another name). The model's store
    lands there, in the hub's database, and a later session recalls it; the client starts no daemon and no
    database of its own."""
    with ScriptedModel(reply) as scripted:
        served = {**hook_env(claude_home, cortex_settings), **scripted.env(), "FROBOZZ_HUB_TOKEN": TOKEN}
        with serving_hub({**served, "FROBOZZ_CORTEX_DEFAULT_NAMESPACE": HUBS_OWN}) as url:
            # claude's machine knows the hub's address and token, not its database
            env = {k: v for k, v in _plugin_env(claude_home).items() if k != "FROBOZZ_DATABASE_URL"}
            env |= {**scripted.env(), "FROBOZZ_HUB_TOKEN": TOKEN}
            given = ["--namespace", namespace] if namespace else []
            done = frobozz("plugin", "install", "--hub", url, *given, env=env, cwd=project)
            assert done.returncode == 0, done.stderr
            assert "note:" not in done.stderr and (namespace or "the hub's default") in done.stdout
            mcp = (plugin_settings.plugin_dir / "frobozz-memory" / ".mcp.json").read_text()
            assert TOKEN not in mcp  # the token stays in claude's environment: no secret on disk

            assert claude_p("keep it, please", env, project, "--allowedTools", STORE)["result"] == "(scripted) kept"
            service = MemoryService(cortex_settings)
            try:
                store = await service.store()
                kept = {
                    ns: [m.content for m in await store.recent(5, ns)] for ns in ("hub-team", HUBS_OWN, "myproject")
                }
            finally:
                await service.aclose()
            assert kept == {
                "hub-team": [DOG] if namespace else [],
                HUBS_OWN: [] if namespace else [DOG],
                "myproject": [],
            }

            claude_p("What is my dog called?", env, project)  # a new session: oriented (or recalled) by the hub
            assert DOG in said(main_requests(scripted)[-1])
    assert daemon_pid(plugin_settings.socket) is None
    assert not (plugin_settings.data_dir / "postgres").exists()  # no embedded database started here either


def test_a_hub_address_with_a_bad_port_is_refused_and_nothing_is_written(
    claude_home, cortex_settings, project, plugin_settings
):
    env = hook_env(claude_home, cortex_settings)
    for bad in ["http://127.0.0.1:abc", "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:-1"]:
        done = frobozz("plugin", "install", "--hub", bad, env=env, cwd=project)
        assert done.returncode == 2 and "--hub" in done.stderr and "port" in done.stderr, (bad, done.stderr)
        assert "memory" not in done.stdout
    assert not plugin_settings.plugin_dir.exists()
    assert not (claude_home / ".claude").exists() and not (project / ".claude").exists()


async def test_a_scoped_token_reaches_through_the_hooks_only_the_namespaces_it_may_write(
    claude_home, cortex_settings, frobozz_env, embedder_ready, project, tmp_path
):
    """Behind scoped tokens, the hooks' namespace (the one the request names, or the hub's default it falls back
    to) is checked against the token's grant as cortex's tools check theirs: another namespace is neither recalled
    from nor archived into; the hook hears why, as memory that is off. Naming another namespace's session (its id is
    the client's to choose) reaches it no more: a prompt in `alices` with Bob's session id recalled from `bobs` and
    was archived in Bob's session."""
    secret = "alice-token-for-the-plugin-test"
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        f'[[token]]\nname = "alice"\nsha256 = "{hashlib.sha256(secret.encode()).hexdigest()}"\n'
        'servers = ["plugin"]\nread = ["bobs"]\nwrite = ["alices"]\n'
    )
    service = MemoryService(cortex_settings)
    try:
        store = await service.store()
        for ns in ("alices", "bobs", HUBS_OWN):
            await store.store(f"The {ns} release train leaves on Thursdays.", namespace=ns)
        sessions = await service.sessions()
        await sessions.adopt("bob-session", "bobs", client="claude code")
        await sessions.archive("bob-session", 1, "user", "Bob's own question.")
    finally:
        await service.aclose()
    env = {**hook_env(claude_home, cortex_settings), "FROBOZZ_HUB_TOKENS": str(tokens)}
    env.pop("FROBOZZ_HUB_TOKEN", None)
    with serving_hub({**env, "FROBOZZ_CORTEX_DEFAULT_NAMESPACE": HUBS_OWN}) as url:

        def asked(namespace: str | None, session: str) -> dict:
            prompt = payload(project, "UserPromptSubmit", prompt="When does the release train leave?")
            request = {"event": "UserPromptSubmit", "input": {**prompt, "session_id": session}, "namespace": namespace}
            answer = httpx.post(f"{url}/plugin/hook", json=request, headers={"Authorization": f"Bearer {secret}"})
            assert answer.status_code == 200, answer.text
            return answer.json()

        assert "alices release train" in asked("alices", "s-1")["context"]
        for namespace in ("bobs", None, 7):  # read only; the hub's default; not a name (so the default)
            refused = asked(namespace, f"s-{namespace}")
            assert "context" not in refused, namespace
            shown = namespace if isinstance(namespace, str) else HUBS_OWN
            assert refused["error"] == f"token 'alice' may not use namespace {shown!r} (the hooks read and write it)"
        through = asked("alices", "bob-session")  # a namespace the token may write, and Bob's session
        assert "context" not in through and "another namespace" in through["error"] and "bobs" not in through["error"]

    service = MemoryService(cortex_settings)
    try:
        sessions = await service.sessions()
        named = ("s-1", "s-bobs", "s-None", "s-7", "bob-session")
        archived = {s: [e.content for e in await sessions.transcript(s)] for s in named}
    finally:
        await service.aclose()
    assert archived == {
        "s-1": ["When does the release train leave?"],
        "s-bobs": [],
        "s-None": [],
        "s-7": [],
        "bob-session": ["Bob's own question."],
    }
