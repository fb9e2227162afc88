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
from typing import Any

from ._events import Event, parse_event, text_of
from .exceptions import EngineError

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_MAX_KEY = 200


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


def _djb2(text: str) -> str:
    """claude's 32-bit string hash (JavaScript's `(h << 5) - h + c | 0`), absolute, in base 36."""
    h = 0
    for char in text:
        h = (h * 31 + ord(char)) & 0xFFFFFFFF
    h = abs(h - 0x100000000 if h >= 0x80000000 else h)
    digits = ""
    while True:
        h, rest = divmod(h, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[rest] + digits
        if not h:
            return digits


def project_key(cwd: str | Path) -> str:
    """The folder claude keeps a directory's sessions in: every non-alphanumeric character of its real
    path made '-', and past 200 characters cut, with a hash of the whole path after it."""
    path = os.path.realpath(cwd)
    key = re.sub(r"[^A-Za-z0-9]", "-", path)
    return key if len(key) <= _MAX_KEY else f"{key[:_MAX_KEY]}-{_djb2(path)}"


def project_dir(cwd: str | Path, env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "projects" / project_key(cwd)


def transcript_path(session_id: str, cwd: str | Path, env: Mapping[str, str] | None = None) -> Path:
    """Where claude keeps a session's transcript for a working folder (an invalid id raises EngineError)."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise EngineError(f"{str(session_id)[:80]!r} is not a session id")
    return project_dir(cwd, env) / f"{session_id}.jsonl"


def _records(path: Path) -> Iterator[dict[str, Any]]:
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
        if (
            record.get("type") in ("user", "assistant")
            and not record.get("isSidechain")
            and not record.get("isMeta")
            and isinstance(record.get("message"), dict)
        ):
            yield parse_event(record, is_replay=True)


def _preview(record: dict[str, Any]) -> str:
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
