"""What a new session starts with, before the first new message: the app's own conversation so far
(`history`), and the documents the user attached. A small document goes into the context whole; a large
one is written under the workspace (`.frobozz/attached/`) and the model is told its path: context lives
in files, not pasted into prompts."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._workspaces import Workspace, write_inside
from .exceptions import InputError

ATTACHED = (".frobozz", "attached")  # under the workspace
_FILE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_HISTORY = 500
MAX_ATTACHED = 50


def preamble(
    workspace: Workspace,
    history: Sequence[Mapping[str, Any]] | None,
    attached: Sequence[Mapping[str, Any]] | None,
    *,
    inline_chars: int,
) -> str:
    parts = []
    if history:
        if not isinstance(history, Sequence) or isinstance(history, str) or len(history) > MAX_HISTORY:
            raise InputError(f"history is a list of at most {MAX_HISTORY} {{role, content}} messages")
        lines = []
        for turn in history:
            role, content = (turn.get("role"), turn.get("content")) if isinstance(turn, Mapping) else (None, None)
            if role not in ("user", "assistant") or not isinstance(content, str):
                raise InputError("each history message is {role: user|assistant, content: text}")
            lines.append(f'<message role="{role}">\n{content}\n</message>')
        parts.append(
            "<conversation-so-far>\nThis conversation began elsewhere; here it is so far. Go on from it."
            f"\n{chr(10).join(lines)}\n</conversation-so-far>"
        )
    if attached:
        if not isinstance(attached, Sequence) or isinstance(attached, str) or len(attached) > MAX_ATTACHED:
            raise InputError(f"attached is a list of at most {MAX_ATTACHED} {{name, content}} documents")
        inline, files = [], []
        for document in attached:
            name, content = (
                (document.get("name"), document.get("content")) if isinstance(document, Mapping) else (None, None)
            )
            if not isinstance(name, str) or not name.strip() or not isinstance(content, str):
                raise InputError("each attached document is {name: text, content: text}")
            if len(content) <= inline_chars:
                inline.append(f'<document name="{name}">\n{content}\n</document>')
            else:
                safe = _FILE.sub("-", name).strip("-.")[:100] or "document"
                path = write_inside(workspace, ATTACHED, safe, content)
                files.append(f"- {path} ({len(content)} characters): {name}")
        if inline:
            parts.append("<attached-documents>\n" + "\n".join(inline) + "\n</attached-documents>")
        if files:
            parts.append(
                "The user attached these documents, too large to show here; read them as you need:\n" + "\n".join(files)
            )
    return "\n\n".join(parts)
