"""`frobozz`: one console script for the servers, the games, the runner, configs and the doctor."""

from __future__ import annotations

import logging
import sys
import warnings

import typer
from rich.console import Console
from rich.logging import RichHandler

from . import _help  # noqa: F401  (flags without a value label in help)
from ._chat import chat
from ._cortex import cortex
from ._database import database
from ._dialogue import dialogue
from ._doctor import doctor
from ._games import games
from ._mcp_config import mcp_config
from ._play import play
from ._plugin import plugin
from ._routines import routine_app
from ._runs import leaderboard, runs, worker
from ._serve import hub_token, serve, web

app = typer.Typer(
    help="Frobozz: an MCP tool hub and headless game runner for Claude.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(games, name="games")
app.add_typer(cortex, name="cortex")
app.add_typer(database, name="database")
app.add_typer(dialogue, name="dialogue")
app.command()(serve)
app.command("hub-token")(hub_token)
app.command()(play)
app.command()(worker)
app.add_typer(runs, name="runs")
app.add_typer(routine_app, name="routine")
app.command()(leaderboard)
app.command()(web)
app.command()(chat)
app.command("mcp-config")(mcp_config)
app.command()(doctor)
app.add_typer(plugin, name="plugin")


@app.callback()
def _root(
    log_level: str = typer.Option(
        "WARNING", envvar="FROBOZZ_LOG_LEVEL", help="Logging level; logs always go to stderr."
    ),
) -> None:
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")  # platformdirs, on machines without one
    logging.basicConfig(
        level=log_level.upper(),
        format="%(message)s",
        handlers=[RichHandler(console=Console(stderr=True), show_path=False)],
    )


BARE_VALUES = {"--memory": ""}  # options whose value may be left out: `--memory` or `--memory NAMESPACE`


def bare_values(args: list[str]) -> list[str]:
    """typer's parser has no options with an optional value: a bare one (at the end, or before another
    option) is given its value here, as click's own parser would."""
    out = []
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else None
        bare = arg in BARE_VALUES and (following is None or (following.startswith("-") and len(following) > 1))
        out.append(f"{arg}={BARE_VALUES[arg]}" if bare else arg)
    return out


def main() -> None:
    app(args=bare_values(sys.argv[1:]))
