"""`frobozz games …`: the catalogue, installing and checking story files, maps, a walkthrough demo."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from frobozz.games import (
    GameError,
    GameLibrary,
    GameMap,
    GameNotFoundError,
    GamesSettings,
    install,
    installed_copy,
    jericho_supports,
    read_story,
    replay_journal,
)

from ._output import err

games = typer.Typer(help="Story files: list, install, verify; maps of played sessions.", no_args_is_help=True)
out = Console()


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(1)


@games.command("list")
def list_games() -> None:
    """Show the catalogue and which games are installed."""
    library = GameLibrary(GamesSettings())
    table = Table("name", "title", "installed", "licence", "path")
    listing = library.listing()
    for g in listing:
        state = "yes" if g.installed else "[red]damaged[/]" if g.damaged else "no"
        table.add_row(g.name, Text(g.title), state, g.license or "?", Text(g.path or ""))
    out.print(table)
    for g in listing:
        if g.damaged:  # whole lines: the path and the command can be copied
            out.print(
                f"{g.name}: {g.damaged} ({g.path})\n  fix: {g.fix}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


@games.command("install")
def install_game(name: str, url: str = typer.Option(None, help="Download from here instead.")) -> None:
    """Download a catalogued game into the data directory and verify its md5 (without --url, nothing to do when
    the very same story is in a games directory already, FROBOZZ_GAMES_DIR's too)."""
    settings = GamesSettings()
    try:
        if url is None and (there := installed_copy(name, GameLibrary(settings).directories)):
            out.print(f"installed {there.path} already ({there.describe()}, md5 {there.md5})", markup=False)
            return
        story = anyio.run(lambda: install(name, settings.installed_games_dir, url=url))
    except GameError as e:
        raise _fail(str(e)) from e
    out.print(f"installed {story.path} ({story.describe()}, md5 {story.md5})", markup=False)


@games.command("verify")
def verify(path: Path, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Check a story file: version, release, serial, md5, and whether jericho supports it."""
    try:
        story = read_story(path)
    except GameError as e:
        raise _fail(str(e)) from e
    report = {
        "path": str(story.path),
        "version": story.version,
        "release": story.release,
        "serial": story.serial,
        "md5": story.md5,
        "bytes": story.size,
        "jericho_supported": jericho_supports(story.md5),
    }
    if as_json:
        out.print_json(json.dumps(report))
        return
    for key, value in report.items():
        out.print(f"{key:18} {value}", markup=False)


@games.command("map")
def show_map(session: str, format: str = typer.Option("text", help="text, dot or mermaid.")) -> None:
    """The explored map of a game session (running or ended), from its journal."""
    if format not in ("text", "dot", "mermaid"):
        raise typer.BadParameter("use text, dot or mermaid", param_hint="--format")
    sessions_dir = GamesSettings().sessions_dir
    hint = (
        f"a game session's id names its journal in {sessions_dir} (ID.jsonl): `games walkthrough --json` gives it as "
        "session_id, `frobozz runs show RUN --json` as game_session for a run played with the game server's tools; "
        "a run's own map (text mode too) is shown by `frobozz runs show RUN`"
    )
    if not session.isalnum():
        raise _fail(f"{session[:80]!r} is not a game session id: {hint}")
    try:
        _, turns = replay_journal(sessions_dir / f"{session}.jsonl")
    except GameNotFoundError as e:
        raise _fail(f"{e}: {hint}") from e
    except GameError as e:
        raise _fail(str(e)) from e
    out.print(GameMap.from_path((t.command, t.location) for t in turns).render(format), markup=False)  # type: ignore[arg-type]  # format: checked


@games.command("walkthrough")
def walkthrough(
    game: str = typer.Argument("zork1"), as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")
) -> None:
    """Play a game's walkthrough through the game MCP server over stdio, and show the result."""
    from ._walkthrough import play_walkthrough  # the MCP client: imported only for this command

    settings = GamesSettings()
    try:
        result = anyio.run(lambda: play_walkthrough(game, settings, progress=None if as_json else err))
    except GameError as e:
        raise _fail(str(e)) from e
    if as_json:
        out.print_json(json.dumps(result))
        return
    table = Table("game", "steps", "score", "moves", "won", "seconds", "steps/s", title="walkthrough")
    table.add_row(
        Text(result["game"]),
        str(result["steps"]),
        f"{result['score']}/{result['max_score']}",
        str(result["moves"]),
        "yes" if result["won"] else "no",
        f"{result['seconds']:.2f}",
        f"{result['steps'] / result['seconds']:.0f}",
    )
    out.print(table)
