"""The guard: a PreToolUse hook on every Read, Edit and Write an agent makes. An agent reads only the
dialogue's files and edits only its own (an agent `dialogue.json`, the scribe `summary.md` and the
synthesis); an edit of `dialogue.json` is worked out on the file as it is and denied, with the reason the
model reads, unless it changes nothing but the last entry's `content` and `consensus`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..engine import HookInput, HookMatcher, HookOutput
from ._directory import DIALOGUE, QUESTION, SUMMARY, SYNTHESIS
from ._entries import check_new_text
from ._text import inert

READS = (QUESTION, DIALOGUE, SUMMARY, SYNTHESIS)
EDITING_TOOLS = ("Edit", "MultiEdit", "Write")
GUARDED = "Read|Edit|MultiEdit|Write"


def proposed_text(tool: str, tool_input: Mapping[str, Any], current: str) -> str | None:
    """The file's text after the call, worked out as the tool would (None: the call cannot apply to it)."""
    if tool == "Write":
        content = tool_input.get("content")
        return content if isinstance(content, str) else None
    edits = tool_input.get("edits") if tool == "MultiEdit" else [tool_input]
    text = current
    for edit in edits or ():
        old, new = edit.get("old_string"), edit.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str) or not old or old not in text:
            return None
        if text.count(old) > 1 and not edit.get("replace_all"):
            return None
        text = text.replace(old, new) if edit.get("replace_all") else text.replace(old, new, 1)
    return text


class Guard:
    """One per role. `denials` counts what it refused; `on_deny` hears each (tool_use_id, tool, file, reason)."""

    def __init__(
        self,
        directory: Path,
        *,
        scribe: bool,
        max_chars: int,
        on_deny: Callable[[str | None, str, str, str], None] | None = None,
    ) -> None:
        self.directory = directory.resolve()
        self.max_chars = max_chars  # an entry's content; the whole of a scribe's file
        self.editable = (SUMMARY, SYNTHESIS) if scribe else (DIALOGUE,)
        self.on_deny = on_deny
        self.denials = 0

    def matcher(self) -> HookMatcher:
        return HookMatcher([self.check], GUARDED)

    def _name(self, raw: object) -> str | None:
        """The dialogue file a path names, or None for anything else: a path that leaves the directory, or goes
        through a symlink (whose target is not where claude would write), names none."""
        if not isinstance(raw, str) or not raw or "\x00" in raw:  # a NUL names no file (realpath would raise)
            return None
        path = Path(os.path.normpath(self.directory / raw))
        if Path(os.path.realpath(path)) != path:
            return None
        return path.name if path.parent == self.directory and path.name in READS else None

    def _deny(self, event: HookInput, name: str, reason: str) -> HookOutput:
        self.denials += 1
        if self.on_deny is not None:
            self.on_deny(event.tool_use_id, event.tool_name or "", name, reason)
        return HookOutput(permission="deny", reason=f"Denied by the dialogue's orchestrator: {reason}")

    async def check(self, event: HookInput) -> HookOutput:
        tool, tool_input = event.tool_name or "", event.tool_input or {}
        raw = tool_input.get("file_path")
        name = self._name(raw)
        shown = name or inert(raw)  # the model's: shown inert
        if name is None:
            return self._deny(event, shown, f"this dialogue's agents use only {', '.join(READS)} in {self.directory}")
        if tool == "Read":
            return HookOutput(permission="allow")
        if tool not in EDITING_TOOLS:
            return self._deny(event, name, f"{tool} is not one of this role's tools")
        if name not in self.editable:
            return self._deny(event, name, f"this role edits only {' and '.join(self.editable)}")
        try:
            current = (self.directory / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return self._deny(event, name, f"{name} does not exist now: edit only the file this turn names")
        proposed = proposed_text(tool, tool_input, current)
        if proposed is None:
            why: str | None = f"old_string must appear in {name} as it is now, once (or with replace_all)"
        elif name == DIALOGUE:
            why = check_new_text(current, proposed, self.max_chars)
        else:
            why = (
                None
                if len(proposed) <= self.max_chars
                else (
                    f"{name} would be {len(proposed)} characters; the limit is {self.max_chars} "
                    "(FROBOZZ_DIALOGUE_MAX_CONTENT_CHARS): write it shorter"
                )
            )
        if why is not None:
            return self._deny(event, name, why)
        return HookOutput(permission="allow")
