"""Help that reads as a newcomer expects: typer labels every option with its Python type, so a flag reads
`--json <bool>` as if it took a value, and a repeatable option `<list[str]>`. Here a flag has no label
(`--json`, `--multi / --no-multi`) and a repeatable option names one value and says it repeats
(`<str> (repeatable)`). Imported by `_app`, before any help is drawn; `_app` calls `one_line_summaries`."""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer
from typer.core import TyperOption

_typer_label = TyperOption.display_type_rich
_LIST = re.compile(r"<list\[(\w+)\]>")


def display_type(option: TyperOption, ctx: Any) -> str | None:
    """The label after an option in help: none for a flag, which takes no value."""
    if option.is_bool_flag:
        return None
    label = _typer_label(option, ctx)
    listed = _LIST.fullmatch(label or "")
    return f"<{listed[1].lower()}> (repeatable)" if listed else label


TyperOption.display_type_rich = display_type  # type: ignore[method-assign, assignment]  # typer: no hook for it


def one_line_summaries(app: typer.Typer) -> None:
    """A group's list of commands shows each command's first paragraph, but typer's rich help keeps its line
    breaks there, so a summary broke off mid-sentence where its docstring's line did (a command's own help
    joins them). Each command, in every group, is given that paragraph on one line as its summary."""
    for info in app.registered_commands:
        if info.short_help is None and info.help is None and info.callback is not None:
            first = inspect.cleandoc(info.callback.__doc__ or "").split("\n\n")[0]
            info.short_help = " ".join(first.split()) or None
    for group in app.registered_groups:
        if group.typer_instance is not None:
            one_line_summaries(group.typer_instance)
