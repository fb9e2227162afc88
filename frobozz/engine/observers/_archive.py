"""Keep every session on disk as it happens: the raw events as JSONL and a readable Markdown file."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from .._events import AssistantMessage, ErrorEvent, Event, ProcessExit, Restarted, Result, UserMessage


def _markdown(event: Event) -> str:
    if isinstance(event, UserMessage):
        parts = [f"**user:** {event.text}"] if event.text else []
        parts += [f"> tool result ({r.tool_use_id}): {str(r.content)[:2000]}" for r in event.tool_results]
        return "\n\n".join(parts)
    if isinstance(event, AssistantMessage):
        parts = [f"**assistant:** {event.text}"] if event.text else []
        parts += [f"> tool call `{t.name}` {json.dumps(dict(t.input))[:2000]}" for t in event.tool_uses]
        return "\n\n".join(parts)
    if isinstance(event, Result):
        cost = f", ${event.total_cost_usd:.4f}" if event.total_cost_usd is not None else ""
        return f"*— turn ended: {event.subtype}{cost}*"
    if isinstance(event, ErrorEvent):
        return f"*error ({event.source}): {event.message}*"
    if isinstance(event, (ProcessExit, Restarted)):
        return f"*{type(event).__name__}: {event}*"
    return ""


class TranscriptArchive:
    """Writes `<dir>/<session_id>.jsonl` and `.md`; events before the session id is known are held."""

    name = "archive"

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.session_id: str | None = None
        self._held: list[Event] = []
        self._jsonl: TextIO | None = None
        self._md: TextIO | None = None

    def on_event(self, event: Event) -> None:
        session_id = getattr(event, "session_id", None)
        if self.session_id is None and isinstance(session_id, str) and session_id:
            self._open(session_id)
        if self._jsonl is None:
            self._held.append(event)
            return
        for held in self._held:
            self._write(held)
        self._held.clear()
        self._write(event)

    def _open(self, session_id: str) -> None:
        self.session_id = session_id
        self.directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(c for c in session_id if c.isalnum() or c in "-_")[:128] or "session"
        self._jsonl = (self.directory / f"{safe}.jsonl").open("a", encoding="utf-8")
        md_path = self.directory / f"{safe}.md"
        new = not md_path.exists()
        self._md = md_path.open("a", encoding="utf-8")
        if new:
            self._md.write(f"# Session {session_id}\n\nStarted {datetime.now(UTC).isoformat(timespec='seconds')}\n\n")

    def _write(self, event: Event) -> None:
        assert self._jsonl is not None and self._md is not None
        record = (
            dict(event.raw)
            if event.raw
            else {
                "type": type(event).__name__,
                **{f.name: getattr(event, f.name) for f in fields(event) if f.name not in ("raw", "is_replay")},
            }
        )
        if event.is_replay:
            record["is_replay"] = True
        self._jsonl.write(json.dumps(record, default=str) + "\n")
        self._jsonl.flush()
        text = _markdown(event)
        if text:
            self._md.write(text + "\n\n")
            self._md.flush()

    def close(self) -> None:
        for f in (self._jsonl, self._md):
            if f is not None:
                f.close()
