"""Installing the plugin the way Claude Code's own commands do: the plugin's files and a local marketplace
are written under the data directory, then `claude plugin marketplace add` and `claude plugin install` do
the rest; the install is recorded only once both succeeded (a failed one is rolled back: the settings file as
it was, byte for byte). Uninstalling runs their opposites and puts the settings file back byte for byte when
nothing else changed in it meanwhile (claude leaves empty `enabledPlugins` and `extraKnownMarketplaces`
behind). The hooks read the record: with nothing installed for their data directory they do nothing."""

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
    settings: PluginSettings,
    namespace: str | None,
    *,
    shared_servers: bool = True,
    hub: str | None = None,
    mcp_servers: dict[str, Any] | None = None,
) -> Path:
    """The plugin's files and the marketplace that lists it; the marketplace's folder. Its MCP servers are
    `mcp_servers` when given (a hub's, reached over HTTP), else served by the memory daemon through the relay
    (`shared_servers`), or each started by claude as a process of its own (the first design's, seconds slower
    per claude: kept for the benchmark's comparison)."""
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
                "failed_for": settings.plugin_failed_for,
                "hub": hub,
                "installed": str(record_file(settings)),  # none recorded there: the hooks do nothing
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
    if mcp_servers is None:
        mcp_servers = {
            name: {"command": python, "args": [*relay, name]}
            if shared_servers
            else {"command": python, "args": ["-m", "frobozz", "plugin", "serve", name], "env": servers_env}
            for name in PLUGIN_SERVERS
        }
    (plugin / ".mcp.json").write_text(json.dumps({"mcpServers": mcp_servers}, indent=2))
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


def record_file(settings: PluginSettings) -> Path:
    """Where the installs of this data directory are recorded (the settings file's bytes from before each)."""
    return settings.plugin_dir / "installed.json"


def _records(settings: PluginSettings) -> dict[str, Any]:
    try:
        records = json.loads(record_file(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def _save(settings: PluginSettings, records: dict[str, Any]) -> None:
    """The records; none left: no file (the hooks of a claude still open then do nothing)."""
    if records:
        record_file(settings).write_text(json.dumps(records, indent=2))
    else:
        record_file(settings).unlink(missing_ok=True)


def _settings_json(target: Path) -> dict[str, Any] | None:
    """The settings file's JSON object; None when there is none or it cannot be read."""
    try:
        value = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _declares(target: Path, key: str, name: str) -> bool:
    """Whether the settings file's `key` (enabledPlugins, extraKnownMarketplaces) names `name`."""
    found = (_settings_json(target) or {}).get(key)
    return isinstance(found, dict) and name in found


def install(
    settings: PluginSettings,
    scope: Scope,
    project: Path,
    namespace: str | None,
    claude: str,
    *,
    shared_servers: bool = True,
    hub: str | None = None,
    mcp_servers: dict[str, Any] | None = None,
) -> Installed:
    """Install (again) at `scope`; the settings file's bytes from before the first install are kept for
    uninstall. Recorded only when claude's commands succeeded: a failure leaves the settings file as it was,
    byte for byte, and nothing recorded. A namespace memory cannot use is refused here (it was taken, and
    every session then said its memory was off), and so is a settings file that is JSON but not an object,
    before anything is written (claude took it, showed the plugin disabled, and uninstall then failed).
    `hub` and `mcp_servers`: the hub the hooks call and the plugin's MCP servers as it serves them (the
    caller makes them: the plugin does not import the servers)."""
    if namespace is not None:
        try:
            check_namespace(namespace)
        except MemoryStoreError as e:
            raise PluginError(str(e)) from e
    target = settings_file(scope, project)
    _check_settings(target)
    records = _records(settings)
    key = str(target)
    before = target.read_bytes() if target.is_file() else None
    folder_existed = target.parent.is_dir()
    record = records.get(key)
    # (a record whose plugin claude does not have is stale: an earlier version recorded failed installs)
    fresh = record is None or not _declares(target, "enabledPlugins", PLUGIN_ID)
    if fresh or record is None:
        original = before.decode("latin-1") if before is not None else None
        record = {"scope": scope, "original": original, "project": str(project), "folder_existed": folder_existed}
    root = write_plugin(settings, namespace, shared_servers=shared_servers, hub=hub, mcp_servers=mcp_servers)
    try:
        _claude(["marketplace", "add", str(root), "--scope", scope], project, claude)
        _claude(["install", PLUGIN_ID, "--scope", scope], project, claude)
    except PluginError:
        if fresh:  # (installed here before: that install stays)
            _forget_marketplace(scope, project, claude, anywhere=not records.keys() - {key})
        _put_back(target, before, folder_existed)
        raise
    records[key] = {**record, "namespace": namespace, "hub": hub}
    _save(settings, records)
    return Installed(scope, target, namespace, hub)


def _check_settings(target: Path) -> None:
    """PluginError for a settings file that is JSON but not an object (`[1, 2]`). One that is not JSON at all is
    left to claude, which says where it cannot read it (and the failed install is rolled back)."""
    try:
        value = json.loads(target.read_bytes())
    except (OSError, ValueError):
        return
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(
            type(value), "a number"
        )
        raise PluginError(
            f"{target} is JSON but {kind}, not an object of settings: fix or move it, then install again "
            "(nothing was changed)"
        )


def _forget_marketplace(scope: Scope, project: Path, claude: str, *, anywhere: bool) -> None:
    """A failed install's marketplace taken out of claude's records (a failed `marketplace add` may have
    recorded it all the same): from the scope's settings, else, when no other install of this data directory
    uses it (`anywhere`), from claude's list of marketplaces."""
    try:
        _claude(["marketplace", "remove", MARKETPLACE, "--scope", scope], project, claude)
    except PluginError:
        if anywhere:
            with contextlib.suppress(PluginError):
                _claude(["marketplace", "remove", MARKETPLACE], project, claude)


def _put_back(target: Path, before: bytes | None, folder_existed: bool) -> None:
    """The settings file as it was before a failed install, byte for byte (or gone, as it was)."""
    with contextlib.suppress(OSError):
        if before is None:
            target.unlink(missing_ok=True)
            if not folder_existed:
                target.parent.rmdir()  # only when empty
        elif target.read_bytes() != before:
            target.write_bytes(before)


@dataclass(frozen=True)
class Uninstalled:
    settings: Path
    daemon: int | None = None  # the pid of the memory daemon stopped with it
    problem: str | None = None  # why its memory daemon could not be stopped


def uninstall(settings: PluginSettings, scope: Scope, project: Path, claude: str) -> Uninstalled:
    """Remove the plugin and its marketplace from `scope`; the settings file as it was, when nothing else
    in it changed. A plugin claude no longer has (uninstalled through claude itself) is forgotten all the
    same, and the settings put back as far as they can be. The last install of this data directory takes its
    memory daemon with it (stopped, or killed when wedged): the one on this data directory's socket, no other
    install's."""
    target = settings_file(scope, project)
    records = _records(settings)
    record = records.get(str(target))
    if record is None:
        raise PluginError(f"the plugin is not installed at {scope} scope ({target}): see `frobozz plugin status`")
    try:
        _claude(["uninstall", PLUGIN_ID, "--scope", scope], project, claude)
    except PluginError:
        if _claude_has(scope, project, claude):  # still there: tried again once what failed is put right
            raise
    try:
        _claude(["marketplace", "remove", MARKETPLACE, "--scope", scope], project, claude)
    except PluginError:
        if _declares(target, "extraKnownMarketplaces", MARKETPLACE):
            raise
    _restore(target, record.get("original"))
    if not record.get("folder_existed", True):
        with contextlib.suppress(OSError):  # only when empty: claude or the user may have put something there since
            target.parent.rmdir()
    del records[str(target)]
    _save(settings, records)
    if records:  # another install of this data directory still uses the daemon
        return Uninstalled(target)
    try:
        return Uninstalled(target, stop_daemon(settings.socket, wait=settings.plugin_stop_wait))
    except PluginError as e:  # uninstalled all the same: the daemon is what is left to say
        return Uninstalled(target, problem=str(e))


def _claude_has(scope: Scope, project: Path, claude: str) -> bool:
    """Whether claude lists the plugin at `scope` (`claude plugin list --json`); True when it cannot tell."""
    try:
        done = subprocess.run(
            [claude, "plugin", "list", "--json"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        listed = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return True
    if not isinstance(listed, list):
        return True
    return any(isinstance(p, dict) and p.get("id") == PLUGIN_ID and p.get("scope") == scope for p in listed)


def _restore(target: Path, original: str | None) -> None:
    """The settings file as it was before the install when nothing else changed in it; else claude's empty
    leftovers taken out of it, the rest as it is now. A file the user's own edit broke is left as it is."""
    now = _settings_json(target) if target.is_file() else {}
    if now is None:
        return
    before: dict[str, Any] | None = {}
    if original is not None:
        try:
            before = json.loads(original.encode("latin-1"))
        except ValueError:
            before = None  # (recorded so by an earlier version: what claude added is all that can go)
    for key in CLAUDE_KEYS:
        if now.get(key) == {} and (key not in before if before is not None else f'"{key}"' not in (original or "")):
            del now[key]
    if now == before:
        if original is None:
            target.unlink(missing_ok=True)
        else:
            target.write_bytes(original.encode("latin-1"))
    elif target.is_file() or now:
        target.write_text(json.dumps(now, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def status(settings: PluginSettings) -> list[Installed]:
    """Where the plugin is installed (as this data directory recorded it)."""
    return [
        Installed(r["scope"], Path(path), r.get("namespace"), r.get("hub")) for path, r in _records(settings).items()
    ]
