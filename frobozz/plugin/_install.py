"""Installing the plugin the way Claude Code's own commands do: the plugin's files and a local marketplace
are written under the data directory, then `claude plugin marketplace add` and `claude plugin install` do
the rest. Uninstalling runs their opposites and puts the settings file back byte for byte when nothing
else changed in it meanwhile (claude leaves empty `enabledPlugins` and `extraKnownMarketplaces` behind)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from frobozz.memory import MemoryStoreError, check_namespace

from ._daemon import stop_daemon
from .exceptions import PluginError
from .settings import PluginSettings

Scope = Literal["user", "project"]
MARKETPLACE, NAME = "frobozz-local", "frobozz-memory"
PLUGIN_ID = f"{NAME}@{MARKETPLACE}"
PLUGIN_SERVERS = ("cortex", "handoff")  # the MCP servers the plugin gives claude
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "PreCompact", "SessionEnd")
MATCHERS = {"PostToolUse": "mcp__.*cortex__store"}  # the model kept a memory: the nudge is done
CLAUDE_KEYS = ("enabledPlugins", "extraKnownMarketplaces")  # what claude's commands add to a settings file
MEMORY_COMMAND = """---
description: What Frobozz memory knows here, and how to keep something
---
Frobozz memory runs around this session: before each prompt it adds the memories that fit, and after
each answer it may suggest facts worth keeping. To keep one, store it with the cortex server's `store`
tool; to look something up, use cortex's `search`. When the user gives arguments, do that with them:
$ARGUMENTS
"""


@dataclass(frozen=True)
class Installed:
    scope: Scope
    settings: Path
    namespace: str | None
    hub: str | None = None  # the hub the hooks call, when not the per-user daemon


def settings_file(scope: Scope, project: Path) -> Path:
    """The settings file claude's commands change for a scope."""
    if scope == "project":
        return project / ".claude" / "settings.json"
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "settings.json"


def write_plugin(
    settings: PluginSettings, namespace: str | None, *, shared_servers: bool = True, hub: str | None = None
) -> Path:
    """The plugin's files and the marketplace that lists it; the marketplace's folder. Its MCP servers are
    served by the memory daemon through the relay (`shared_servers`), or each started by claude as a process
    of its own (the first design's, seconds slower per claude: kept for the benchmark's comparison)."""
    root = settings.plugin_dir
    plugin = root / NAME
    shutil.rmtree(plugin, ignore_errors=True)
    for folder in (root / ".claude-plugin", plugin / ".claude-plugin", plugin / "hooks", plugin / "commands"):
        folder.mkdir(parents=True, exist_ok=True)
    (root / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps(
            {
                "name": MARKETPLACE,
                "owner": {"name": "Frobozz"},
                "plugins": [
                    {"name": NAME, "source": f"./{NAME}", "description": "Frobozz memory around every session"}
                ],
            },
            indent=2,
        )
    )
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        json.dumps(
            {
                "name": NAME,
                "version": "0.1.0",
                "description": (
                    "Long-term memory around every session: orientation, recall, suggestions, hand-off letters"
                ),
            },
            indent=2,
        )
    )
    shutil.copyfile(Path(__file__).with_name("_hook.py"), plugin / "hooks" / "frobozz_hook.py")
    python = sys.executable
    command = [python, "-m", "frobozz", "plugin", "daemon", "--socket", str(settings.socket)]
    (plugin / "frobozz.json").write_text(
        json.dumps(
            {
                "socket": str(settings.socket),
                "command": command,
                "log": str(settings.log),
                "namespace": namespace,
                "env": {"FROBOZZ_DATA_DIR": str(settings.data_dir)},
                "limits": settings.limits,
                "hub": hub,
            },
            indent=2,
        )
    )
    hook = (
        '"{python}" -I -S "${{CLAUDE_PLUGIN_ROOT}}/hooks/frobozz_hook.py" {event} '
        '"${{CLAUDE_PLUGIN_ROOT}}/frobozz.json"'
    )
    (plugin / "hooks" / "hooks.json").write_text(
        json.dumps(
            {
                "hooks": {
                    event: [
                        {
                            **({"matcher": MATCHERS[event]} if event in MATCHERS else {}),
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": hook.format(python=python, event=event),
                                    "timeout": int(settings.limits[event]) + 5,
                                }
                            ],
                        }
                    ]
                    for event in EVENTS
                }
            },
            indent=2,
        )
    )
    servers_env = {"FROBOZZ_DATA_DIR": str(settings.data_dir)}
    if namespace:
        servers_env["FROBOZZ_CORTEX_DEFAULT_NAMESPACE"] = namespace
    relay = ["-I", "-S", "${CLAUDE_PLUGIN_ROOT}/hooks/frobozz_hook.py", "mcp", "${CLAUDE_PLUGIN_ROOT}/frobozz.json"]
    (plugin / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    name: {"command": python, "args": [*relay, name]}
                    if shared_servers
                    else {"command": python, "args": ["-m", "frobozz", "plugin", "serve", name], "env": servers_env}
                    for name in PLUGIN_SERVERS
                }
            },
            indent=2,
        )
    )
    (plugin / "commands" / "memory.md").write_text(MEMORY_COMMAND)
    return root


def _claude(args: list[str], cwd: Path, claude: str) -> None:
    try:
        done = subprocess.run(
            [claude, "plugin", *args], cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PluginError(f"`claude plugin {args[0]}` could not run ({type(e).__name__}: {e})") from e
    if done.returncode:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise PluginError(f"`claude plugin {' '.join(args[:2])}` failed: {said[-1] if said else done.returncode}")


def _record(settings: PluginSettings) -> Path:
    return settings.plugin_dir / "installed.json"


def _records(settings: PluginSettings) -> dict[str, Any]:
    try:
        return json.loads(_record(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def install(
    settings: PluginSettings,
    scope: Scope,
    project: Path,
    namespace: str | None,
    claude: str,
    *,
    shared_servers: bool = True,
    hub: str | None = None,
) -> Installed:
    """Install (again) at `scope`; the settings file's bytes from before the first install are kept for
    uninstall. A namespace memory cannot use is refused here (it was taken, and every session then said its
    memory was off)."""
    if namespace is not None:
        try:
            check_namespace(namespace)
        except MemoryStoreError as e:
            raise PluginError(str(e)) from e
    target = settings_file(scope, project)
    records = _records(settings)
    key = str(target)
    if key not in records:
        original = target.read_bytes().decode("latin-1") if target.is_file() else None
        records[key] = {
            "scope": scope,
            "original": original,
            "project": str(project),
            "folder_existed": target.parent.is_dir(),
        }
    records[key]["namespace"], records[key]["hub"] = namespace, hub
    root = write_plugin(settings, namespace, shared_servers=shared_servers, hub=hub)
    _record(settings).write_text(json.dumps(records, indent=2))
    _claude(["marketplace", "add", str(root), "--scope", scope], project, claude)
    _claude(["install", PLUGIN_ID, "--scope", scope], project, claude)
    return Installed(scope, target, namespace, hub)


@dataclass(frozen=True)
class Uninstalled:
    settings: Path
    daemon: int | None = None  # the pid of the memory daemon stopped with it
    problem: str | None = None  # why its memory daemon could not be stopped


def uninstall(settings: PluginSettings, scope: Scope, project: Path, claude: str) -> Uninstalled:
    """Remove the plugin and its marketplace from `scope`; the settings file as it was, when nothing else
    in it changed. The last install of this data directory takes its memory daemon with it (stopped, or
    killed when wedged): the one on this data directory's socket, no other install's."""
    target = settings_file(scope, project)
    records = _records(settings)
    record = records.get(str(target))
    if record is None:
        raise PluginError(f"the plugin is not installed at {scope} scope ({target}): see `frobozz plugin status`")
    _claude(["uninstall", PLUGIN_ID, "--scope", scope], project, claude)
    _claude(["marketplace", "remove", MARKETPLACE, "--scope", scope], project, claude)
    _restore(target, record["original"])
    if not record.get("folder_existed", True):
        with contextlib.suppress(OSError):  # only when empty: claude or the user may have put something there since
            target.parent.rmdir()
    del records[str(target)]
    _record(settings).write_text(json.dumps(records, indent=2))
    if records:  # another install of this data directory still uses the daemon
        return Uninstalled(target)
    try:
        return Uninstalled(target, stop_daemon(settings.socket, wait=settings.plugin_stop_wait))
    except PluginError as e:  # uninstalled all the same: the daemon is what is left to say
        return Uninstalled(target, problem=str(e))


def _restore(target: Path, original: str | None) -> None:
    try:
        now = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {}
    except ValueError:
        return  # the user's own edit broke it: left as it is
    before: dict[str, Any] = {}
    if original is not None:
        try:
            before = json.loads(original.encode("latin-1"))
        except ValueError:
            return
    for key in CLAUDE_KEYS:
        if now.get(key) == {} and key not in before:
            del now[key]
    if now == before:
        if original is None:
            target.unlink(missing_ok=True)
        else:
            target.write_bytes(original.encode("latin-1"))
    else:
        target.write_text(json.dumps(now, indent=2) + "\n", encoding="utf-8")


def status(settings: PluginSettings) -> list[Installed]:
    """Where the plugin is installed (as this data directory recorded it)."""
    return [
        Installed(r["scope"], Path(path), r.get("namespace"), r.get("hub")) for path, r in _records(settings).items()
    ]
