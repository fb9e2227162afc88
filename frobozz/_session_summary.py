"""A claude session's summary, folded from its transcript entries as they are appended to a session store.

The same contract as the official Agent SDK's `fold_session_summary`, so a store that keeps these
summaries serves the official SDK's session listing too: `{session_id, mtime, data}`, where `data`
holds only set-once or last-wins fields (a store never re-reads what it appended) and `mtime` is the
store's own write time, stamped by the store after it persists (never taken from an entry).
Shared by the engine's in-memory store and memory's Postgres store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

_LAST_WINS = {
    "customTitle": "custom_title",
    "aiTitle": "ai_title",
    "lastPrompt": "last_prompt",
    "summary": "summary_hint",
    "gitBranch": "git_branch",
}
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>")
_NOT_A_PROMPT = re.compile(  # what claude writes in a user turn that the user did not type
    r"^(?:<local-command-stdout>|<session-start-hook>|<tick>|<goal>|\[Request interrupted by user[^\]]*\]|"
    r"\s*<ide_opened_file>[\s\S]*</ide_opened_file>\s*$|\s*<ide_selection>[\s\S]*</ide_selection>\s*$)"
)
PROMPT_CHARS = 200

__all__ = ["PROMPT_CHARS", "fold_summary"]


def _epoch_ms(stamp: Any) -> int | None:
    if not isinstance(stamp, str):
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _texts(entry: Mapping[str, Any]) -> list[str]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        b["text"]
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def _first_prompt(data: dict[str, Any], entry: Mapping[str, Any]) -> None:
    """The first thing the user typed (a slash command only as a fallback), set once."""
    if data.get("first_prompt_locked") or entry.get("type") != "user":
        return
    if entry.get("isMeta") is True or entry.get("isCompactSummary") is True:
        return
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list) and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
        return
    for raw in _texts(entry):
        text = raw.replace("\n", " ").strip()
        if not text:
            continue
        command = _COMMAND.search(text)
        if command:
            data.setdefault("command_fallback", command.group(1))
            continue
        if _NOT_A_PROMPT.match(text):
            continue
        data["first_prompt"] = text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS].rstrip() + "\u2026"
        data["first_prompt_locked"] = True
        return


def fold_summary(
    previous: Mapping[str, Any] | None, key: Mapping[str, Any], entries: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """`previous` (or nothing) with `entries` folded in. Only for a main transcript (no subpath); the
    `mtime` is carried over as it was (0 for a new session): the store stamps it."""
    if previous is None:
        summary: dict[str, Any] = {"session_id": key["session_id"], "mtime": 0, "data": {}}
    else:
        summary = {"session_id": previous["session_id"], "mtime": previous["mtime"], "data": dict(previous["data"])}
    data = summary["data"]
    for entry in entries:
        data.setdefault("is_sidechain", entry.get("isSidechain") is True)
        stamp = _epoch_ms(entry.get("timestamp"))
        if stamp is not None:
            data.setdefault("created_at", stamp)
        cwd = entry.get("cwd")
        if isinstance(cwd, str) and cwd:
            data.setdefault("cwd", cwd)
        _first_prompt(data, entry)
        for source, field in _LAST_WINS.items():
            if isinstance(entry.get(source), str):
                data[field] = entry[source]
        if entry.get("type") == "tag":
            tag = entry.get("tag")
            if isinstance(tag, str) and tag:
                data["tag"] = tag
            else:
                data.pop("tag", None)  # an empty tag clears it
    return summary
