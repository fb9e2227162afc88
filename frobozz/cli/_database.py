"""`frobozz database stop`: the embedded Postgres that `play --memory`, `chat`, `serve all`, the MCP servers and
workers leave running for the next start (a one-shot command stops the one it started itself)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from ._output import err

database = typer.Typer(
    help="The embedded Postgres (memory, the run queue): stop it when nothing uses it.", no_args_is_help=True
)
out = Console(soft_wrap=True)


@database.command("stop")
def stop_cmd() -> None:
    """Stop the embedded Postgres, unless a process still uses it (it starts again by itself when needed)."""
    from frobozz.memory import MemorySettings, embedded_users, stop_embedded_unused

    settings = MemorySettings()
    if settings.database_url is not None:
        err.print("FROBOZZ_DATABASE_URL is set: that Postgres is yours, not Frobozz's to stop", highlight=False)
        raise typer.Exit(1)
    users = embedded_users(settings)
    if users is None:
        out.print(f"the embedded Postgres (in {settings.postgres_dir}) is not running", highlight=False, markup=False)
        return
    if users or not stop_embedded_unused(settings):
        users = embedded_users(settings) or users
        kill = f" (`kill {' '.join(map(str, users))}`)" if users else ""
        err.print(
            f"the embedded Postgres (in {settings.postgres_dir}) is in use by "
            f"{'; '.join(map(_named, users)) or 'a process not known'}: stop that first{kill}, then try again"
            f"{_daemons(users)}",
            highlight=False,
            markup=False,
        )
        raise typer.Exit(1)
    out.print(f"stopped the embedded Postgres (in {settings.postgres_dir})", highlight=False, markup=False)


def _command(pid: int) -> list[str] | None:
    """What a process runs, `python -m frobozz …` as the user would type it (`frobozz …`); None when unknown."""
    import psutil

    try:
        words = psutil.Process(pid).cmdline()
    except (psutil.Error, OSError):
        return None
    if len(words) > 2 and words[1:3] == ["-m", "frobozz"]:  # python -m frobozz …: as the user typed it
        words = ["frobozz", *words[3:]]
    return words


def _daemons(pids: list[int]) -> str:
    """What to say of the Claude Code plugin's memory daemons among `pids`: claude's next hook starts one again."""
    daemons = [str(pid) for pid in pids if (_command(pid) or [])[:3] == ["frobozz", "plugin", "daemon"]]
    if not daemons:
        return ""
    return (
        f"; process {', '.join(daemons)} is the Claude Code plugin's memory daemon, which claude's next prompt "
        "starts again: `frobozz plugin uninstall` removes the plugin and stops it"
    )


def _named(pid: int) -> str:
    """A process by its pid and what it runs (`frobozz chat …`, claude's MCP server), as `ps` would show it."""
    from frobozz._text import printable

    words = _command(pid)
    if words is None:
        return f"process {pid}"
    line = " ".join(Path(words[0]).name if i == 0 else w for i, w in enumerate(words))
    return f"process {pid} ({printable(line[:80])}{'…' if len(line) > 80 else ''})"


def say_postgres_stays(console: Console, label: str = "note") -> None:
    """After a command that leaves the embedded Postgres running (for the next run, server or session): say so,
    and how to stop it, when it runs; nothing with a database of one's own (FROBOZZ_DATABASE_URL), nor when
    the settings are what failed (the command's own error says so)."""
    from pydantic import ValidationError

    from frobozz.memory import MemorySettings, embedded_note, embedded_users

    try:
        settings = MemorySettings()
    except ValidationError:
        return
    if embedded_users(settings) is not None and (note := embedded_note(settings)):
        console.print(f"{label}: {note}", markup=False, highlight=False, soft_wrap=True)
