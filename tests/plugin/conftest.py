"""The plugin installed into a fresh HOME, its daemon on the test's database, and claude run against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from frobozz.memory import MemoryService
from frobozz.plugin import PluginSettings, stop_daemon

CAT = "The user's cat is called Zorkmid and she is afraid of grues."


def hook_env(claude_home: Path, cortex_settings, **more: str) -> dict[str, str]:
    """What claude (and so the hooks, and the daemon they start) runs with: the test's HOME and database."""
    return {
        **_plugin_env(claude_home),
        "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
        **more,
    }


def _plugin_env(claude_home: Path, **more: str) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(claude_home),
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "FROBOZZ_PLUGIN_IDLE": "300",
        "FROBOZZ_PLUGIN_DEADLINE": "10",
        "FROBOZZ_PLUGIN_LIMITS_SCALE": "6",
        **more,
    }


def frobozz(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frobozz", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "myproject"
    folder.mkdir()
    return folder


@pytest.fixture
def plugin_settings(frobozz_env: Path) -> Iterator[PluginSettings]:
    """The plugin's settings for the test's data folder; its daemon is stopped after the test."""
    settings = PluginSettings()
    yield settings
    stop_daemon(settings.socket)
    shutil.rmtree(settings.socket.with_suffix(".off"), ignore_errors=True)  # a test's that had no daemon to clear it
    settings.socket.with_suffix(".lock").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def embedder_ready(cache_dir: Path) -> None:
    """The local embedding model made once in the session's cache (its first export takes half a minute),
    so no hook's limit is spent on it."""
    import anyio

    from frobozz.memory import MemorySettings
    from frobozz.memory._embeddings import make_embedder

    embedder = make_embedder(MemorySettings(cache_dir=cache_dir))
    anyio.run(embedder.embed, ["warming up"])


# What `frobozz plugin install` writes at user scope: claude's settings, its plugin records and cache (HOME), and
# the plugin with its local marketplace (the data folder). Their paths are the only thing that differs by test.
INSTALLED = ("home/.claude.json", "home/.claude/settings.json", "home/.claude/plugins", "data/claude-plugin")


def socket_of(data_dir: Path) -> str:
    return str(PluginSettings(data_dir=data_dir).socket)


@pytest.fixture(scope="session")
def install_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin installed once per test worker, in a folder laid out as a test's (`home`, `data`, `myproject`):
    an install is a Python start and two claude starts (3 to 5 s), and `installed` wants one in most plugin tests.
    `test_install.py` checks that a copy (`clone_install`) is what an install at the test's own paths writes."""
    root = tmp_path_factory.mktemp("plugin-install")
    for folder in ("home", "data", "myproject"):
        (root / folder).mkdir()
    env = _plugin_env(root / "home", FROBOZZ_DATA_DIR=str(root / "data"))
    env = {k: v for k, v in env.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_CONFIG_DIR", "CLAUDECODE"))}
    done = frobozz("plugin", "install", env=env, cwd=root / "myproject")
    assert done.returncode == 0, done.stderr
    return root


def installed_files(root: Path) -> list[Path]:
    """The files of an install under `root`, relative to it."""
    found = []
    for name in INSTALLED:
        source = root / name
        found += [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    return [path.relative_to(root) for path in found]


def clone_install(template: Path, root: Path, into: Path | None = None) -> None:
    """The template's install as `frobozz plugin install` would have written it under `root` (a test's tmp_path):
    its files copied (into `into`, by default `root`), with the template's folder and daemon socket in them replaced
    by the test's."""
    swaps = {socket_of(template / "data"): socket_of(root / "data"), str(template): str(root)}
    for name in installed_files(template):
        path, target = template / name, (into or root) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        for old, new in swaps.items():
            text = text.replace(old, new)
        target.write_text(text, encoding="utf-8")
        shutil.copymode(path, target)


@pytest.fixture
def installed(
    claude_home: Path,
    cortex_settings,
    project: Path,
    plugin_settings: PluginSettings,
    embedder_ready: None,
    install_template: Path,
    tmp_path: Path,
) -> dict[str, str]:
    """The plugin installed at user scope into the fresh HOME (a copy of the worker's one install, see
    `install_template`): claude's environment."""
    assert claude_home == tmp_path / "home" and project == tmp_path / "myproject"
    assert plugin_settings.data_dir == tmp_path / "data"
    clone_install(install_template, tmp_path)
    return hook_env(claude_home, cortex_settings)


def hook(event: str, payload: dict | bytes, env: dict[str, str], settings: PluginSettings) -> dict:
    """Run the installed hook command as claude would: its JSON output (empty: nothing added)."""
    config = settings.plugin_dir / "frobozz-memory" / "frobozz.json"
    script = settings.plugin_dir / "frobozz-memory" / "hooks" / "frobozz_hook.py"
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(script), event, str(config)],
        input=raw,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


@pytest.fixture
async def memories(cortex_settings) -> list[int]:
    """The cat, stored before any session, then five newer memories, so the orientation's newest few leave
    the cat for recall to find."""
    service = MemoryService(cortex_settings)
    try:
        store = await service.store()
        ids = [(await store.store(CAT, namespace="myproject"))[0].id]
        for n in range(5):
            ids.append(
                (await store.store(f"Build note {n}: the linter runs before the tests.", namespace="myproject"))[0].id
            )
        return ids
    finally:
        await service.aclose()
