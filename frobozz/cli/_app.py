"""`frobozz`: one console script for the servers, the games, the runner, configs and the doctor."""

from __future__ import annotations

import atexit
import gc
import logging
import sys
import warnings
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from . import _help  # (flags without a value label in help; one-line summaries)
from ._chat import chat
from ._cortex import cortex
from ._database import database
from ._dialogue import dialogue
from ._doctor import doctor
from ._games import games
from ._logs import quiet_floods
from ._mcp_config import mcp_config
from ._output import err
from ._play import play
from ._plugin import plugin
from ._routines import routine_app
from ._runs import leaderboard, runs, worker
from ._serve import hub_token, serve, web

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

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
_help.one_line_summaries(app)


@app.callback()
def _root(
    ctx: typer.Context,
    log_level: str | None = typer.Option(
        None,
        envvar="FROBOZZ_LOG_LEVEL",
        show_default="WARNING",
        help="Logging level; logs always go to stderr.",
    ),
) -> None:
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")  # platformdirs, on machines without one
    source = ctx.get_parameter_source("log_level")  # (by its name: typer's click may not be the `click` here)
    log_level = log_level or _dotenv_log_level()
    if not isinstance(logging.getLevelName(log_level.upper()), int):
        problem = f"{log_level[:40]!r} is not a level: use DEBUG, INFO, WARNING, ERROR or CRITICAL"
        if source is not None and source.name == "COMMANDLINE":
            raise typer.BadParameter(problem, param_hint="--log-level")
        err.print(f"[red]error:[/red] FROBOZZ_LOG_LEVEL: {escape(problem)}")  # as every other setting's
        raise typer.Exit(1)
    logging.basicConfig(
        level=log_level.upper(),
        format="%(message)s",
        handlers=[quiet_floods(RichHandler(console=Console(stderr=True), show_path=False))],
    )


def _dotenv_log_level() -> str:
    """FROBOZZ_LOG_LEVEL from a .env file in the current folder, as every other setting is read (typer reads the
    environment only); WARNING when it is not there either."""
    from dotenv import dotenv_values

    try:
        found = dotenv_values(".env").get("FROBOZZ_LOG_LEVEL")
    except OSError:  # (a .env that is not a readable file: the settings models pass it over too)
        found = None
    return found or "WARNING"


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
    atexit.register(_skip_freeing_at_exit)
    try:
        app(args=bare_values(sys.argv[1:]))
    except Exception as e:
        found = _settings_error(e) or (None if logging.getLogger().isEnabledFor(logging.DEBUG) else _file_error(e))
        if found is None:
            raise
        err.print(f"[red]error:[/red] {escape(found)}")
        sys.exit(1)


def _skip_freeing_at_exit() -> None:
    """At exit Python frees every module's classes, functions and pydantic validators one by one, all of them in
    reference cycles the garbage collector must find, for memory the OS takes back at once: 0.1-0.2 s of CPU of
    a command's 0.4-1.4 s (bench/cli_exit.py), a stdio server closed by its client or a one-shot `cortex search`.
    What is garbage by now is collected first, so its finalizers run as before; the rest is frozen, left out
    of the collections the interpreter's teardown makes. So an object that only a reference cycle keeps alive
    until the teardown is not finalized: none of Frobozz's own needs it (files and connections are closed with
    `with`), and exit handlers registered before this one (at import) run after it, as they did."""
    gc.collect()
    gc.freeze()


def _settings_error(error: BaseException) -> str | None:
    """What is wrong with a setting (an environment variable, or .env), where one made a command fail: named as
    the variable it comes from, not as pydantic's model field (within an exception group too)."""
    import os
    import re

    from pydantic import AliasChoices, ValidationError
    from pydantic_settings import BaseSettings, SettingsError

    if isinstance(error, BaseExceptionGroup):
        return next(filter(None, map(_settings_error, error.exceptions)), None)
    unparsed = re.search(r'parsing value for field "(\w+)"', str(error)) if isinstance(error, SettingsError) else None
    if not isinstance(error, ValidationError) and unparsed is None:
        return None
    if isinstance(error, ValidationError):
        models = [cls for cls in _subclasses(BaseSettings) if cls.__name__ == error.title]
    else:
        models = [cls for cls in _subclasses(BaseSettings) if unparsed and unparsed[1] in cls.model_fields]
    if not models:
        return None

    def variable(loc: str) -> tuple[str, bool]:
        """The variable behind pydantic's `loc` (a field's name, or one of its aliases): the one set, if any; and
        whether it holds a secret (its value is then not repeated)."""
        names, secret = [], False
        for model in models:  # several parts may call theirs Settings: the one with the field
            prefix = model.model_config.get("env_prefix") or ""
            for field, info in model.model_fields.items():
                alias = info.validation_alias
                choices = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []
                choices += [alias] if isinstance(alias, str) else []
                if loc == field or loc.lower() in (c.lower() for c in choices):
                    names += [c.upper() for c in choices if c.lower() != field.lower()] or [(prefix + field).upper()]
                    secret = secret or "SecretStr" in str(info.annotation)
        given = {key.upper() for key in os.environ}
        return next((n for n in names if n in given), names[0] if names else loc.upper()), secret

    if unparsed is not None:  # a list or a dict it could not read (pydantic-settings reads them as JSON)
        return f"{variable(unparsed[1])[0]}: cannot be read ({error.__cause__ or error})"
    assert isinstance(error, ValidationError)
    said = []
    for e in error.errors():
        name, secret = variable(str(e["loc"][0])) if e["loc"] else (error.title, False)
        msg = str(e["msg"]).removeprefix("Value error, ")  # (pydantic's prefix for a validator's own words)
        said.append(f"{name}: {msg} " + ("(a secret: not shown)" if secret else f"(given {e['input']!r:.60})"))
    return "; ".join(said)


def _file_error(error: BaseException) -> str | None:
    """A file or folder a command could not use (an unwritable FROBOZZ_DATA_DIR, a full disk), in one line, when
    that is all that went wrong (a group with anything else beside it is shown whole); with
    FROBOZZ_LOG_LEVEL=DEBUG the traceback is shown instead."""
    if isinstance(error, BaseExceptionGroup):
        said = [_file_error(e) for e in error.exceptions]
        return said[0] if said and all(said) else None
    if not isinstance(error, OSError) or not error.filename:
        return None
    what = f"move {error.filename} to {error.filename2}" if error.filename2 else f"use {error.filename}"
    return f"cannot {what}: {error.strerror or error} (FROBOZZ_LOG_LEVEL=DEBUG shows where)"


def _subclasses(cls: type[BaseSettings]) -> list[type[BaseSettings]]:
    found: list[type[BaseSettings]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found
