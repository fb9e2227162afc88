"""`frobozz`: one console script for the servers, the games, the runner, configs and the doctor."""

from __future__ import annotations

import logging
import warnings

import typer
from rich.console import Console
from rich.logging import RichHandler

from ._chat import chat
from ._cortex import cortex
from ._doctor import doctor
from ._games import games
from ._mcp_config import mcp_config
from ._play import play
from ._serve import serve

app = typer.Typer(help="Frobozz: an MCP tool hub and headless game runner for Claude.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
app.add_typer(games, name="games")
app.add_typer(cortex, name="cortex")
app.command()(serve)
app.command()(play)
app.command()(chat)
app.command("mcp-config")(mcp_config)
app.command()(doctor)


@app.callback()
def _root(log_level: str = typer.Option("WARNING", envvar="FROBOZZ_LOG_LEVEL",
                                        help="Logging level; logs always go to stderr.")) -> None:
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")  # platformdirs, on machines without one
    logging.basicConfig(level=log_level.upper(), format="%(message)s",
                        handlers=[RichHandler(console=Console(stderr=True), show_path=False)])


def main() -> None:
    app()
