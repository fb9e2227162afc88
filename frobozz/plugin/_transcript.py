"""Claude's whole transcript of a session, read when it ends: every entry (prompts, answers, tool calls and
their results, its subagents' transcripts), secrets redacted, for `TranscriptStore` (resumable, complete)
and for the loop's archive (tool calls and results in brief, searchable beside the turns the hooks kept).

The path comes from the hook's input: only a `<session id>.jsonl` file is read, up to a size, so a hostile
payload cannot make the daemon archive any other file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._redact import redact_value

MAX_BYTES = 64 * 1024 * 1024  # of one transcript file; a bigger one is archived up to there
BRIEF = 500  # characters of a tool call's input or result kept in the loop's archive


@dataclass(frozen=True)
class Transcript:
    project_key: str  # claude's folder for the project (its `projects/<key>/`)
    main: list[dict[str, Any]]
    subagents: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # subpath → entries


def _entries(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        data = f.read(MAX_BYTES)
    entries = []
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut off at the limit, or one claude was still writing
        if isinstance(entry, dict):
            entries.append(redact_value(entry))
    return entries


def read_transcript(transcript_path: str, session_id: str) -> Transcript | None:
    """The session's transcript, redacted; None when there is none (or the path names another file)."""
    path = Path(transcript_path) if transcript_path else None
    if path is None or path.name != f"{session_id}.jsonl" or not path.is_file():
        return None
    subagents = {}
    folder = path.with_suffix("") / "subagents"
    if folder.is_dir():
        for sub in sorted(folder.glob("*.jsonl")):
            if sub.is_file() and not sub.is_symlink():
                subagents[f"subagents/{sub.stem}"] = _entries(sub)
    return Transcript(path.parent.name, _entries(path), subagents)


def _brief(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= BRIEF else text[:BRIEF] + f"… ({len(text)} characters)"


ToolStep = tuple[Literal["tool_use", "tool_result"], str, dict[str, Any]]  # (kind, brief content, data)


def tool_steps(entries: list[dict[str, Any]]) -> list[ToolStep]:
    """The tool calls and their results, in order: (kind, brief content, data with the call's id)."""
    steps: list[ToolStep] = []
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                steps.append(
                    (
                        "tool_use",
                        f"{block.get('name', '?')} {_brief(block.get('input', {}))}",
                        {"id": block["id"], "tool": str(block.get("name", ""))},
                    )
                )
            elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                content = block.get("content")
                if isinstance(content, list):
                    content = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
                steps.append(
                    (
                        "tool_result",
                        _brief(content if content is not None else ""),
                        {"id": block["tool_use_id"], "is_error": bool(block.get("is_error"))},
                    )
                )
    return steps
