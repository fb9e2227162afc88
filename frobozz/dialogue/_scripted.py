"""The offline stand-in for claude in a dialogue (`--model scripted`): each turn it reads the file the
instruction names last, then fills its part with one Edit, as a real model would with these tools. It is
product code (offline demos) and the tests' model: one implementation, not two.

It knows its role from the header in its system prompt and the round from the instruction; it agrees (sets
`consensus`) when its role and round are in `agree`, or writes one of `phrase`'s words instead."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from ..engine.scripted import MessagesRequest, Reply, ToolUse
from ._directory import PENDING
from ._roles import HEADER

_PATH = re.compile(r"`(/[^`\n]+)`")  # the orchestrator puts each path in backquotes
_ROUND = re.compile(r"Round (\d+)")
EMPTY_LAST = '"content": "",\n    "consensus": false\n  }\n]'


def instruction_of(request: MessagesRequest) -> str:
    """The user text that began the current turn (the orchestrator's instruction)."""
    for message in reversed(request.messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts = [
            b.get("text", "")
            for b in blocks
            if b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<system-reminder>")
        ]
        if texts:
            return "\n".join(texts)
    return ""


def last_tool(request: MessagesRequest) -> str | None:
    """The tool the model called last in this turn (None at the turn's start)."""
    if not request.tool_results():
        return None
    for message in reversed(request.messages):
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for block in reversed(message["content"]):
                if block.get("type") == "tool_use":
                    return str(block.get("name"))
    return None


class ScriptedDialogue:
    """A handler for `ScriptedModel`: `ScriptedModel(ScriptedDialogue(agree={(2, "Architect-1")}))`."""

    def __init__(self, *, agree: Collection[tuple[int, str]] = (), phrase: str | None = None) -> None:
        self.agree = set(agree)
        self.phrase = phrase

    def content(self, role: str, round_: int) -> str:
        return f"(scripted) {role}, round {round_}: my position, having read the files."

    def edit(self, role: str, round_: int, path: str) -> dict[str, Any]:
        if path.endswith(".json"):
            agrees = (round_, role) in self.agree
            text = self.content(role, round_)
            if agrees and self.phrase:
                text, agrees = f"{text} {self.phrase}", False
            new = f'"content": {json.dumps(text)},\n    "consensus": {json.dumps(agrees)}\n  }}\n]'
            return {"file_path": path, "old_string": EMPTY_LAST, "new_string": new}
        what = "synthesis" if "synthesis" in path else f"summary of round {round_}"
        return {"file_path": path, "old_string": PENDING, "new_string": f"(scripted) {role}'s {what}."}

    def __call__(self, request: MessagesRequest) -> Reply | str:
        instruction = instruction_of(request)
        paths = _PATH.findall(instruction.split("Edit ", 1)[-1])
        found = _ROUND.search(instruction)
        header = HEADER.search(request.system)
        role = header.group(1) if header else "someone"
        if not paths:
            return "(scripted) I have nothing to edit."
        target, round_ = paths[0], int(found.group(1)) if found else 0
        step = last_tool(request)
        if step is None:
            return Reply((ToolUse("Read", {"file_path": target}),))
        if step == "Read":
            return Reply((ToolUse("Edit", self.edit(role, round_, target)),))
        return "(scripted) Done."
