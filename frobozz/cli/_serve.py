"""`frobozz serve NAME`: run one MCP server over stdio."""

from __future__ import annotations

import typer

from frobozz.servers import SERVERS, load_server


def serve(name: str = typer.Argument(..., help=f"The server: {', '.join(SERVERS)}.")) -> None:
    """Run an MCP server over stdio (as `claude --mcp-config` launches it)."""
    if name not in SERVERS:
        raise typer.BadParameter(f"no server {name!r}; known: {', '.join(SERVERS)}", param_hint="NAME")
    load_server(name).run("stdio")
