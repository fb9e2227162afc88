"""Every command's help as a newcomer reads it: a flag takes no value, so it has no `<bool>` label; a group's
list of commands gives each one's summary whole."""

import inspect
import re

import typer
from typer.testing import CliRunner

from frobozz.cli._app import app

PLAIN = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def _commands(command, path=()):
    yield list(path)
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_no_command_labels_a_flag_as_taking_a_value_or_a_list_by_its_python_type():
    runner, seen = CliRunner(), 0
    for path in _commands(typer.main.get_command(app)):
        done = runner.invoke(app, [*path, "--help"], env=PLAIN)
        assert done.exit_code == 0, (path, done.output)
        assert "<bool>" not in done.output and "<list[" not in done.output, (path, done.output)
        seen += 1
    assert seen > 40  # every command and group, not only the root
    play = runner.invoke(app, ["play", "--help"], env=PLAIN).output
    json_line = next(line for line in play.splitlines() if "--json" in line)
    assert re.search(r"--json\s+Print one final JSON", json_line), json_line  # the flag, then what it does
    assert re.search(r"--multi\s+--no-multi\s+Run several", play)
    assert "<int range>" in play  # options that take a value still say what kind
    chat = runner.invoke(app, ["chat", "--help"], env=PLAIN).output
    assert "(repeatable)" in chat


def test_a_groups_list_of_commands_gives_each_its_first_paragraph_unbroken():
    """typer's rich help kept a docstring's line breaks in that list: `serve`'s summary ended "or the", and
    "agent service." stood on a line of its own."""
    runner, root, seen = CliRunner(), typer.main.get_command(app), 0
    for path in _commands(root):
        group = root
        for name in path:
            group = group.commands[name]
        if not hasattr(group, "commands"):
            continue
        shown = runner.invoke(app, [*path, "--help"], env={**PLAIN, "COLUMNS": "1000"}).output
        for name, command in group.commands.items():
            if command.hidden:
                continue
            first = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
            assert re.search(rf"│ {re.escape(name)} +{re.escape(first)} +│", shown), (path, name, shown)
            seen += 1
    assert seen > 40
