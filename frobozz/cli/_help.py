"""Help that reads as a newcomer expects: typer labels every option with its Python type, so a flag reads
`--json <bool>` as if it took a value, and a repeatable option `<list[str]>`. Here a flag has no label
(`--json`, `--multi / --no-multi`) and a repeatable option names one value and says it repeats
(`<str> (repeatable)`). Imported by `_app`, before any help is drawn."""

from __future__ import annotations

import re
from typing import Any

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
