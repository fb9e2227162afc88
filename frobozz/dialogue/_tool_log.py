"""Each role's tool calls: the engine's tool log underneath, and a line a person reads —
`[Tool] Edit: dialogue.json (old: 40 chars, new: 95 chars) ok 31 ms` — written to the role's log file in
`.dialogue/` and handed to the live view."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..engine import AssistantMessage, Event
from ..engine.observers import ToolCall, ToolLog
from ._text import inert


def tool_line(call: ToolCall, tool_input: Mapping[str, Any]) -> str:
    """The line of one call; sizes only, never what was written."""
    if call.name in ("Edit", "MultiEdit"):
        edits = tool_input.get("edits") if call.name == "MultiEdit" else [tool_input]
        old = sum(len(str(e.get("old_string", ""))) for e in edits or () if isinstance(e, Mapping))
        new = sum(len(str(e.get("new_string", ""))) for e in edits or () if isinstance(e, Mapping))
        size = f"old: {old} chars, new: {new} chars"
    elif call.name == "Write":
        size = f"{len(str(tool_input.get('content', '')))} chars"
    else:
        size = f"{call.output_chars} chars out"
    target = f": {inert(call.target, 80)}" if call.target else ""  # the model's path: shown as data
    return f"[Tool] {call.name}{target} ({size}) {call.outcome} {call.duration_ms} ms"


class RoleToolLog:
    """An observer for one role's session; `calls` has its finished calls, `on_line` hears each line."""

    name = "dialogue_tool_log"

    def __init__(self, cwd: Path, log_file: Path, on_line: Callable[[str], None] | None = None) -> None:
        self.log_file = log_file
        self.on_line = on_line
        self._inputs: dict[str, Mapping[str, Any]] = {}
        self._log = ToolLog(cwd=cwd, on_call=self._finished)

    @property
    def calls(self) -> list[ToolCall]:
        return self._log.calls

    def denied(self, tool_use_id: str | None) -> None:
        """The guard refused this call (before its result comes)."""
        self._log.denied(tool_use_id)

    def on_event(self, event: Event) -> None:
        if isinstance(event, AssistantMessage) and not event.is_replay:
            for use in event.tool_uses:
                self._inputs[use.id] = use.input
        self._log.on_event(event)

    def _finished(self, call: ToolCall) -> None:
        line = tool_line(call, self._inputs.pop(call.tool_use_id, {}))
        with self.log_file.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"at": call.started_at, "line": line}) + "\n")
        if self.on_line is not None:
            self.on_line(line)
