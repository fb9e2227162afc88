"""`frobozz dialogue run`: agents (and a scribe) work through a dialogue's files while the orchestrator owns
its structure; a live view of each step and tool call, then a table. Killed, it resumes with `--resume DIR`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import typer
from rich.console import Console
from rich.table import Table

from ._output import err

out = Console(highlight=False, soft_wrap=True)  # whole lines, piped or at 80 columns: one event, one line
dialogue = typer.Typer(help="Orchestrated dialogues: several agents work through files.", no_args_is_help=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def _agents(specs: list[str]) -> list[tuple[str, Path]]:
    agents = []
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise _fail(f"--agent takes NAME=PROMPT_FILE, not {spec[:80]!r}")
        agents.append((name, Path(file)))
    return agents


def _show(event) -> None:
    """The live view: one line per step, tool call, denial, restore and consensus (no file content)."""
    from frobozz.dialogue import (
        ConsensusReached,
        FileRestored,
        Resumed,
        StepFinished,
        StepStarted,
        ToolDenied,
        ToolUsed,
    )

    if isinstance(event, StepStarted):
        out.print(f"▶ {event.step.describe()}", markup=False)
    elif isinstance(event, ToolUsed):
        out.print(f"  {event.line}", markup=False)
    elif isinstance(event, ToolDenied):
        out.print(f"  ✗ {event.tool} {event.file} denied: {event.reason}", markup=False)
    elif isinstance(event, FileRestored):
        out.print(f"  ! {event.file} restored from its last good copy: {event.reason}", markup=False)
    elif isinstance(event, StepFinished):
        out.print(f"  ✓ {_count(event.tools, 'tool')}, {event.seconds:.1f} s, ${event.cost_usd:.4f}", markup=False)
    elif isinstance(event, ConsensusReached):
        out.print(f"★ consensus in round {event.round} ({event.role}, {event.how})", markup=False)
    elif isinstance(event, Resumed):
        again = f"; {event.rewound} was cut off and runs again" if event.rewound else ""
        out.print(f"resuming after {_count(event.done, 'finished step')}{again}", markup=False)


def _count(n: int, word: str) -> str:
    """`1 round`, `2 rounds`, `1 entry`, `0 entries`."""
    return f"{n} {word}" if n == 1 else f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def _table(report, path: Path) -> None:
    title = f"dialogue {report.state.value}: {_count(report.rounds, 'round')}, {_count(report.entries, 'entry')}"
    table = Table(title=title)
    table.add_column("role", overflow="fold")  # a role's whole name, folded in its cell at 80 columns
    table.add_column("agent", overflow="fold")
    for number in ("turns", "tools", "denied", "time", "cost"):
        table.add_column(number, justify="right")
    for r in report.roles:
        table.add_row(
            r.role, r.agent, str(r.turns), str(r.tools), str(r.denied), f"{r.seconds:.1f} s", f"${r.cost_usd:.4f}"
        )
    out.print(table, soft_wrap=False)  # a table fits the width; the lines around it stay whole
    consensus = (
        f"round {report.consensus_round} ({report.consensus_role}, {report.consensus_how})"
        if report.consensus_round is not None
        else "none"
    )
    out.print(f"consensus: {consensus}; restores: {report.restores}; files in {path}", markup=False)


@dialogue.command("run")
def run(
    question: Path | None = typer.Option(None, "--question", dir_okay=False, help="The question (a text file)."),
    agent: list[str] = typer.Option(
        [],
        "--agent",
        help="NAME=PROMPT_FILE, once per agent, in speaking order; the role is the prompt's header <Role Prompt: ...>.",
    ),
    scribe: Path | None = typer.Option(None, "--scribe", dir_okay=False, help="The scribe's prompt file."),
    rounds: int | None = typer.Option(None, "--rounds", min=1, max=100, help="Rounds at most (default 3)."),
    directory: Path | None = typer.Option(
        None,
        "--dir",
        file_okay=False,
        help="Where the dialogue's files go (default: a new folder in the data directory).",
    ),
    model: str | None = typer.Option(
        None, help="claude's model; `scripted` runs offline on the project's scripted model."
    ),
    resume: Path | None = typer.Option(None, "--resume", file_okay=False, help="Take up the dialogue in DIR."),
) -> None:
    """Run a dialogue: each agent in turn fills its entry of dialogue.json; the scribe sums up each round."""
    from frobozz.dialogue import (
        Dialogue,
        DialogueError,
        DialogueInputError,
        DialogueSettings,
        Role,
        TurnError,
        load_roles,
        read_question,
    )

    settings = DialogueSettings()
    from frobozz.engine import model_name_problem

    if model is not None and model != "scripted" and (problem := model_name_problem(model)):  # (as play takes)
        raise _fail(f"--model {problem}")
    try:
        if resume is not None:
            if question or agent or scribe or directory or rounds is not None:
                raise _fail(
                    "--resume takes the dialogue as it was set up: leave out --question, --agent, --scribe, "
                    "--dir and --rounds"
                )
            path, model = resume, model or Dialogue.model_of(resume)
            question_text = ""
            roles: tuple[Role, ...] = ()
        else:
            if question is None:
                raise _fail("--question FILE is needed")
            roles = load_roles(_agents(agent), scribe, limit=settings.max_prompt_bytes)
            question_text = read_question(question, limit=settings.max_question_bytes)
            if directory is None:
                from frobozz.games import GamesSettings

                stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
                directory = GamesSettings().data_dir / "dialogues" / stamp
            path = directory
    except DialogueError as e:
        raise _fail(str(e)) from None

    async def main() -> object:
        from frobozz.dialogue import ScriptedDialogue
        from frobozz.engine import EngineOptions
        from frobozz.engine.scripted import ScriptedModel

        async def go(options: EngineOptions) -> object:
            if resume is not None:
                made = Dialogue.resume(path, options=options, settings=settings, on_event=_show)
            else:
                made = Dialogue.create(
                    path,
                    question_text,
                    roles,
                    rounds=rounds or 3,
                    options=options,
                    settings=settings,
                    on_event=_show,
                    model=model,
                )
                out.print(f"dialogue in {made.dir.path}", markup=False)
            return await made.run()

        if model == "scripted":
            async with ScriptedModel(ScriptedDialogue()) as scripted:
                return await go(EngineOptions(env=scripted.env()))
        return await go(EngineOptions(model=model))

    try:
        report = anyio.run(main)
    except DialogueInputError as e:
        raise _fail(str(e)) from None
    except TurnError as e:
        raise _fail(f"{e}; the dialogue stopped: resume it with --resume {path}", 1) from None
    except DialogueError as e:
        raise _fail(str(e)) from None
    except KeyboardInterrupt:
        raise _fail(f"interrupted: resume with --resume {path}", 130) from None
    _table(report, path)
