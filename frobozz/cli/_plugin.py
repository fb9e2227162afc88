"""`frobozz plugin`: memory in the user's own Claude Code (install, uninstall, status), and the memory
daemon its hooks start (`frobozz plugin daemon`, not for people to run by hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from ._output import err

out = Console(highlight=False)
plugin = typer.Typer(
    help="Memory in your own Claude Code: a plugin whose hooks run the memory loop.", no_args_is_help=True
)


@plugin.command(hidden=True)
def daemon(socket: Path | None = typer.Option(None, help="The socket to listen on (default: the settings').")) -> None:
    """Serve the plugin's hooks until idle (the first hook starts it)."""
    import anyio

    from frobozz.plugin import PLUGIN_SERVERS, MemoryDaemon, PluginError, PluginSettings

    try:
        anyio.run(
            MemoryDaemon(PluginSettings(), socket, servers={name: _factory(name) for name in PLUGIN_SERVERS}).serve
        )
    except PluginError as e:
        err.print(f"error: {e}", markup=False)
        raise typer.Exit(1) from e


def _factory(name: str):
    """The named server as the daemon makes it for one claude: its settings with the daemon's changes, on a
    service sharing the daemon's pool and embedding model."""
    from frobozz.servers import load_server

    def make(overrides, service):
        return load_server(name, service=service, **overrides)

    return make


def _claude() -> str:
    from frobozz.engine import CLINotFoundError, find_claude

    try:
        return str(find_claude())
    except CLINotFoundError as e:
        err.print(f"error: {e}", markup=False)
        raise typer.Exit(1) from e


@plugin.command()
def install(
    scope: str = typer.Option("user", help="user: every project; project: this one (.claude/settings.json)."),
    namespace: str | None = typer.Option(
        None,
        help="Whose memory (default: each project's, the git root's or the folder's name; with --hub, the hub's "
        "default namespace).",
    ),
    hub: str | None = typer.Option(
        None,
        help="A running hub's address (`frobozz serve all --http`): the hooks and the plugin's cortex and "
        "handoff are the hub's, with FROBOZZ_HUB_TOKEN from claude's environment, instead of a daemon of their "
        "own. Both work in --namespace, else in the hub's default namespace (not each project's).",
    ),
) -> None:
    """Install the memory plugin into Claude Code (through claude's own plugin commands)."""
    from frobozz.plugin import PluginError, PluginSettings
    from frobozz.plugin import install as install_plugin

    if scope not in ("user", "project"):
        err.print("error: --scope is user or project", markup=False)
        raise typer.Exit(2)
    if namespace is not None and not namespace.strip():
        err.print(
            "error: --namespace is empty: leave it out for the default (each project's, or with --hub the hub's)",
            markup=False,
        )
        raise typer.Exit(2)
    if hub is not None and namespace is not None:  # (said as the namespace's, not as the hub address's)
        from frobozz.memory import MemoryStoreError, check_namespace

        try:
            check_namespace(namespace)
        except MemoryStoreError as e:
            err.print(f"error: --namespace: {e}", markup=False)
            raise typer.Exit(1) from e
    address, servers = _hub_servers(hub, namespace) if hub is not None else (None, None)
    try:
        done = install_plugin(
            PluginSettings(),
            scope,  # type: ignore[arg-type]  # checked against user/project above
            Path.cwd(),
            namespace,
            _claude(),
            hub=address,
            mcp_servers=servers,
        )
    except PluginError as e:
        err.print(f"error: {e}", markup=False)
        raise typer.Exit(1) from e
    whose = done.namespace or ("the hub's default" if done.hub else "each project its own")
    out.print(
        f"installed frobozz-memory ({done.scope} scope, {done.settings}); namespace: {whose}; memory from "
        f"{done.hub + ' (FROBOZZ_HUB_TOKEN)' if done.hub else 'a per-user daemon'}. New claude sessions have "
        "memory.",
        markup=False,
    )


def _hub_servers(hub: str, namespace: str | None) -> tuple[str, dict[str, Any]]:
    """The hub's address and the plugin's MCP servers as the hub serves them (over HTTP, its token read from
    `${FROBOZZ_HUB_TOKEN}` in claude's environment as claude starts: no secret written), sent `namespace` as their
    default (X-Frobozz-Namespace), the one the hooks use, else none: the hub's default for both; exit 2 for an
    address that is not a hub's, as `hub_config` checks it (a bad port was taken, and every hook then failed
    silently)."""
    from frobozz.plugin import PLUGIN_SERVERS
    from frobozz.servers import ConfigError, hub_config

    try:
        servers = hub_config(list(PLUGIN_SERVERS), hub, namespace=namespace)["mcpServers"]
    except ConfigError as e:
        err.print(f"error: --hub: {e}", markup=False)
        raise typer.Exit(2) from e
    return servers[PLUGIN_SERVERS[0]]["url"].removesuffix(f"/{PLUGIN_SERVERS[0]}/mcp"), servers


@plugin.command()
def uninstall(scope: str = typer.Option("user", help="The scope it was installed at.")) -> None:
    """Remove the plugin, and stop its memory daemon; the settings file is left as it was before."""
    from frobozz.plugin import PluginError, PluginSettings
    from frobozz.plugin import uninstall as uninstall_plugin

    if scope not in ("user", "project"):
        err.print("error: --scope is user or project", markup=False)
        raise typer.Exit(2)
    try:
        done = uninstall_plugin(PluginSettings(), scope, Path.cwd(), _claude())  # type: ignore[arg-type]  # scope: checked
    except PluginError as e:
        err.print(f"error: {e}", markup=False)
        raise typer.Exit(1) from e
    out.print(f"uninstalled frobozz-memory ({scope} scope, {done.settings})", markup=False)
    if done.daemon:
        out.print(f"stopped its memory daemon (pid {done.daemon})", markup=False)
    if done.problem:
        err.print(f"note: {done.problem}", markup=False)


@plugin.command()
def status() -> None:
    """Where the plugin is installed, and whether its memory daemon runs."""
    from frobozz.plugin import PluginSettings, daemon_pid
    from frobozz.plugin import status as installed

    settings = PluginSettings()
    found = installed(settings)
    if not found:
        out.print("not installed", markup=False)
    for one in found:
        out.print(
            f"installed: {one.scope} scope, {one.settings}; namespace: {one.namespace or 'per project'}"
            f"{f'; hooks call the hub at {one.hub}' if one.hub else ''}",
            markup=False,
        )
    pid = daemon_pid(settings.socket)
    out.print(
        f"memory daemon: {f'running (pid {pid})' if pid else 'not running'}; socket {settings.socket}", markup=False
    )
    if not pid and (failed := _last_failure(settings.log.with_suffix(".failed"), settings.socket.with_suffix(".lock"))):
        out.print(failed, markup=False, soft_wrap=True)


def _last_failure(failures: Path, lock: Path) -> str | None:
    """The last failure of a daemon to start, as the hook kept it, with when: unless a daemon has started since
    (each start that succeeds writes its pid into the lock, after any failure kept before it)."""
    from datetime import datetime

    try:
        when = failures.stat().st_mtime
        if lock.exists() and lock.stat().st_mtime >= when:
            return None
        why = failures.read_text(encoding="utf-8", errors="replace")[:400].strip()
    except OSError:
        return None
    said = datetime.fromtimestamp(when).astimezone().isoformat(" ", "seconds")
    return f"last failed to start at {said}: {why}" if why else None


@plugin.command("serve", hidden=True)
def serve_for_claude(name: str = typer.Argument(..., help="cortex or handoff")) -> None:
    """An MCP server as the plugin starts it: the project's namespace by default (the one the hooks recall
    from), and what cortex stores marked seen in claude's session (recall does not hand it back)."""
    import os

    from frobozz.plugin import project_namespace
    from frobozz.servers import load_server

    if name not in ("cortex", "handoff"):
        err.print("error: the plugin serves cortex or handoff", markup=False)
        raise typer.Exit(2)
    project = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    os.environ.setdefault("FROBOZZ_CORTEX_DEFAULT_NAMESPACE", project_namespace(project))
    if os.environ.get("CLAUDE_CODE_SESSION_ID"):
        os.environ.setdefault("FROBOZZ_CORTEX_SEEN_SESSION", os.environ["CLAUDE_CODE_SESSION_ID"])
    load_server(name).run("stdio")
