"""The tool log: every tool call of a session, as a record and one line each —
`[tool] Edit notes.md (old 12, new 40 chars) ok 35 ms` — for `play`, `chat` and the agent service alike.

A call starts with the assistant's tool_use and ends with its tool_result; its outcome is `ok`, `error`,
or `denied` (a permission callback or hook refused it: the callback says so with `denied(id)`, and the
turn's Result lists the rest in `permission_denials`)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from frobozz._text import printable

from .._events import AssistantMessage, Event, Result, UserMessage

log = logging.getLogger("frobozz.tools")
Outcome = Literal["ok", "error", "denied"]
_TARGETS = ("file_path", "notebook_path", "path", "command", "url", "pattern", "query", "description", "prompt")


@dataclass(frozen=True)
class ToolCall:
    tool_use_id: str
    name: str
    target: str  # in brief: a file, a command, a URL
    input_size: str  # "old 12, new 40 chars" for an Edit, "40 chars" for a Write, "N chars in" otherwise
    output_chars: int
    duration_ms: int
    outcome: Outcome
    started_at: float  # epoch seconds

    def line(self) -> str:
        target = f" {self.target}" if self.target else ""
        return f"[tool] {printable(self.name)}{target} ({self.input_size}) {self.outcome} {self.duration_ms} ms"


def target_of(tool_input: Mapping[str, Any], cwd: str | Path | None = None) -> str:
    """What a call works on, in brief: a path (relative to `cwd` when inside it), a command, a URL."""
    for key in _TARGETS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            if key in ("file_path", "notebook_path", "path") and cwd is not None:
                try:
                    relative = os.path.relpath(value, cwd)
                    value = value if relative.startswith("..") else relative
                except ValueError:
                    pass
            value = printable(" ".join(value.split()))
            return value if len(value) <= 80 else value[:79] + "…"
    return ""


def input_size(name: str, tool_input: Mapping[str, Any]) -> str:
    if name in ("Edit", "MultiEdit") and "old_string" in tool_input:
        return (
            f"old {len(str(tool_input.get('old_string', '')))}, new {len(str(tool_input.get('new_string', '')))} chars"
        )
    if name == "Write":
        return f"{len(str(tool_input.get('content', '')))} chars"
    return f"{len(json.dumps(dict(tool_input), ensure_ascii=False))} chars in"


class ToolLog:
    """An observer. `calls` holds each finished call in order; `on_call` (and the `frobozz.tools` log, at
    info) gets each as it finishes."""

    name = "tool_log"

    def __init__(self, *, cwd: str | Path | None = None, on_call: Callable[[ToolCall], None] | None = None) -> None:
        self.cwd = cwd
        self.on_call = on_call
        self.calls: list[ToolCall] = []
        self._open: dict[str, tuple[str, Mapping[str, Any], float, float]] = {}
        self._denied: set[str] = set()

    def denied(self, tool_use_id: str | None) -> None:
        """A permission callback refused this call (before its result comes)."""
        if tool_use_id:
            self._denied.add(tool_use_id)

    def on_event(self, event: Event) -> None:
        if event.is_replay:
            return
        if isinstance(event, AssistantMessage):
            for use in event.tool_uses:
                self._open[use.id] = (use.name, use.input, time.monotonic(), time.time())
        elif isinstance(event, UserMessage):
            for result in event.tool_results:
                opened = self._open.pop(result.tool_use_id, None)
                if opened is not None:
                    self._finish(result.tool_use_id, opened, result.content, result.is_error)
        elif isinstance(event, Result):
            refused = {d.get("tool_use_id") for d in event.raw.get("permission_denials") or () if isinstance(d, dict)}
            self.calls = [replace(c, outcome="denied") if c.tool_use_id in refused else c for c in self.calls]

    def _finish(
        self, tool_use_id: str, opened: tuple[str, Mapping[str, Any], float, float], content: Any, is_error: bool
    ) -> None:
        name, tool_input, started, wall = opened
        outcome: Outcome = "denied" if tool_use_id in self._denied else "error" if is_error else "ok"
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
        call = ToolCall(
            tool_use_id=tool_use_id,
            name=name,
            target=target_of(tool_input, self.cwd),
            input_size=input_size(name, tool_input),
            output_chars=len(text or ""),
            duration_ms=round((time.monotonic() - started) * 1000),
            outcome=outcome,
            started_at=wall,
        )
        self.calls.append(call)
        log.info("%s", call.line())
        if self.on_call is not None:
            self.on_call(call)
