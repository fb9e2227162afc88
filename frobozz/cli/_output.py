"""The console every command writes its errors and notices to (stderr, whole lines), and a table's cells.

An error names paths, run ids and commands a user copies; wrapped at the terminal's width, a path
was cut in two mid-name (and a test reading it failed on a longer path). Whole lines, whatever the
width; no highlighting, as a value in an error is data.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from frobozz._text import printable, printable_lines

err = Console(stderr=True, soft_wrap=True, highlight=False)


def cell(value: object, *, lines: bool = False) -> Text:
    """A value as it is, in a table or a line: what a user, a model or a mail named (a model, a reason, a
    subject) is no markup ('[/x]' ended a listing in a traceback) and sends no ESC sequence to the terminal.
    `lines`: its line breaks kept (a memory's text)."""
    text = "" if value is None else str(value)
    return Text(printable_lines(text) if lines else printable(text))
