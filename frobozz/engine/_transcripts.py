"""claude's session transcripts on disk: where they are, replaying them as events, listing them.

claude keeps each session as JSONL under `<config>/projects/<cwd with every non-alphanumeric
character replaced by '-'>/<session_id>.jsonl`; `<config>` is $CLAUDE_CONFIG_DIR or ~/.claude.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ._events import Event, parse_event, text_of
from .exceptions import EngineError

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    path: Path
    created: str | None
    last_activity: str | None
    preview: str


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"])
    return Path(env.get("HOME") or Path.home()) / ".claude"


def project_dir(cwd: str | Path, env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(Path(cwd).resolve()))


def transcript_path(session_id: str, cwd: str | Path, env: Mapping[str, str] | None = None) -> Path:
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise EngineError(f"{str(session_id)[:80]!r} is not a session id")
    return project_dir(cwd, env) / f"{session_id}.jsonl"


def _records(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(record, dict):
                yield record


def replay(path: Path) -> Iterator[Event]:
    """The conversation in a transcript as events (is_replay=True): user turns and assistant messages."""
    for record in _records(path):
        if record.get("type") in ("user", "assistant") and not record.get("isSidechain") \
                and not record.get("isMeta") and isinstance(record.get("message"), dict):
            yield parse_event(record, is_replay=True)


def _preview(record: dict) -> str:
    return " ".join(text_of((record.get("message") or {}).get("content")).split())[:120]


def session_info(path: Path) -> SessionInfo:
    created = last = None
    preview = ""
    for record in _records(path):
        stamp = record.get("timestamp")
        if isinstance(stamp, str):
            created = created or stamp
            last = stamp
        if not preview and record.get("type") == "user" and not record.get("isMeta"):
            preview = _preview(record)
    return SessionInfo(session_id=path.stem, path=path, created=created, last_activity=last, preview=preview)


def list_sessions(cwd: str | Path, env: Mapping[str, str] | None = None) -> list[SessionInfo]:
    """The sessions claude keeps for `cwd`, most recently active first."""
    directory = project_dir(cwd, env)
    if not directory.is_dir():
        return []
    infos = [session_info(p) for p in directory.glob("*.jsonl")]
    return sorted(infos, key=lambda i: i.last_activity or "", reverse=True)
