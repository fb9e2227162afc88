"""`frobozz mcp-config`: an MCP config with absolute paths for this install (or the addresses of a hub's servers,
with `--url`), printed, written, or merged into a project's `.mcp.json`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from frobozz.servers import (
    BUNDLES,
    ConfigError,
    check_names,
    config_for,
    hub_config,
    install_config,
    write_config,
)


def mcp_config(
    servers: str = typer.Option(
        "frobozz", "--servers", "-s", help=f"Server names, comma-separated, or a bundle: {', '.join(BUNDLES)}."
    ),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the config to this file."),
    install_to: bool = typer.Option(
        False,
        "--install",
        help="Add the servers to the project's .mcp.json, as `claude mcp add --scope project` would.",
    ),
    project: Path = typer.Option(Path("."), "--project", help="The project directory for --install."),
    url: str | None = typer.Option(
        None,
        "--url",
        show_default=False,
        help="The servers of the hub at this address (`serve all --http`: http://HOST:PORT), over HTTP.",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        show_default=False,
        help="With --url: the hub's token, written into the config; without it, claude sends $FROBOZZ_HUB_TOKEN.",
    ),
    namespace: str | None = typer.Option(
        None,
        "--namespace",
        show_default=False,
        help="With --url: the namespace cortex and handoff work in when a tool names none (sent as "
        "X-Frobozz-Namespace); without it, the hub's default.",
    ),
) -> None:
    """Print (or write, or install) an MCP config for claude or any MCP client."""
    names = list(BUNDLES.get(servers, [n.strip() for n in servers.split(",") if n.strip()]))
    if token is not None and url is None:
        raise typer.BadParameter("a token is for a hub: give its address with --url too", param_hint="--token")
    if namespace is not None and url is None:
        raise typer.BadParameter(
            "a namespace is sent to a hub: give its address with --url too (a local server takes "
            "FROBOZZ_CORTEX_DEFAULT_NAMESPACE)",
            param_hint="--namespace",
        )
    if token is not None and install_to:
        raise typer.BadParameter(
            "the token would be written into the project's .mcp.json, which is often shared: leave --token out "
            "(claude then sends $FROBOZZ_HUB_TOKEN)",
            param_hint="--token",
        )
    if install_to and (problem := _not_a_folder(project)):
        raise typer.BadParameter(f"the project {problem}", param_hint="--project")
    if output is not None and (problem := _not_a_folder(output.parent)):
        raise typer.BadParameter(f"the file's folder {problem}", param_hint="--output")
    try:
        config = config_for(check_names(names)) if url is None else hub_config(names, url, token, namespace=namespace)
        if install_to:
            path, added = install_config(config, project)
            typer.echo(f"added {', '.join(added)} to {path}", err=True)
        if output is not None:
            write_config(config, output)
            typer.echo(f"wrote {output}", err=True)
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from e
    except OSError as e:
        raise typer.BadParameter(f"cannot write: {e}") from e
    if not install_to and output is None:
        typer.echo(json.dumps(config, indent=2))


def _not_a_folder(folder: Path) -> str | None:
    """What is wrong with writing into `folder`, which is not made (`-o /nonexistent/x.json` made /nonexistent, and
    `-o /etc/passwd/x` said "File exists"), or None: it is a folder."""
    if folder.is_dir():
        return None
    for part in (folder, *folder.parents):
        if part.exists() or part.is_symlink():
            if part.is_dir():
                break
            return f"{folder} is not a folder" + ("" if part == folder else f": {part} is a file")
    return f"{folder} does not exist (make it first: it is not made)"
