"""Memory in the user's own Claude Code: a plugin (manifest, hooks, the cortex and handoff servers, a
`/memory` command) installed through claude's own plugin commands, and the per-user daemon its hooks
call, which runs the memory loop (orientation, recall, suggest, archive, hand-off) for any session."""

from ._daemon import MemoryDaemon, daemon_pid, stop_daemon
from ._hook_memory import HookMemory, project_namespace
from ._hub import hook_app
from ._install import PLUGIN_ID, PLUGIN_SERVERS, Installed, Uninstalled, install, settings_file, status, uninstall
from .exceptions import PluginError
from .settings import PluginSettings

__all__ = [
    "PLUGIN_ID",
    "PLUGIN_SERVERS",
    "HookMemory",
    "Installed",
    "MemoryDaemon",
    "PluginError",
    "PluginSettings",
    "Uninstalled",
    "daemon_pid",
    "hook_app",
    "install",
    "project_namespace",
    "settings_file",
    "status",
    "stop_daemon",
    "uninstall",
]
