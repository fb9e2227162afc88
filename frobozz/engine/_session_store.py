"""Session stores: claude's transcripts kept somewhere other than this machine's disk.

The protocol has the methods and meaning of the official Agent SDK's `SessionStore`, so a store made
for either serves both: `append` and `load` are required; `list_sessions`, `list_session_summaries`,
`delete` and `list_subkeys` are optional (probed for, never required). A key names a main transcript
(`project_key`, `session_id`) or one of its subagents' (`subpath`, such as "subagents/agent-1").

`materialize` does the reverse of mirroring: it loads a session from a store into a private claude
config directory laid out as claude expects, so claude resumes it on a machine that never saw it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, Protocol, TypedDict, TypeVar

import anyio

from .._scratch import ScratchFolder
from . import _transcripts
from .exceptions import EngineError

log = logging.getLogger("frobozz.engine.store")
T = TypeVar("T")

__all__ = ["Materialized", "SessionKey", "SessionStore", "implements", "key_for_path", "materialize"]


class SessionKey(TypedDict):
    """Where a transcript is kept in a session store: its project, its session, and a subagent's subpath."""

    project_key: str
    session_id: str
    subpath: NotRequired[str]  # only for a subagent's transcript; never ""


class SessionListSubkeysKey(TypedDict):
    project_key: str
    session_id: str


class SessionStoreListEntry(TypedDict):
    session_id: str
    mtime: int  # the store's write time, epoch milliseconds


class SessionSummaryEntry(TypedDict):
    session_id: str
    mtime: int
    data: dict[str, Any]  # folded by frobozz._session_summary; opaque to the store


Entry = dict[str, Any]  # one line of claude's JSONL transcript, passed through as it is


class SessionStore(Protocol):
    """Where claude's transcripts are kept off this disk: the official Agent SDK's protocol (`append`, `load`;
    the rest optional). `frobozz.memory.TranscriptStore` is one on Postgres."""

    async def append(self, key: SessionKey, entries: list[Entry]) -> None: ...

    async def load(self, key: SessionKey) -> list[Entry] | None: ...

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        raise NotImplementedError

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        raise NotImplementedError

    async def delete(self, key: SessionKey) -> None:
        raise NotImplementedError

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        raise NotImplementedError


def implements(store: object, method: str) -> bool:
    """Whether `store` has its own `method` (not the protocol's placeholder, which raises)."""
    found = getattr(type(store), method, None)
    return callable(found) and found is not getattr(SessionStore, method, None)


def key_for_path(file_path: str, projects_dir: Path, project_key: str | None = None) -> SessionKey | None:
    """The key of a transcript file claude wrote under `projects_dir`: `<project>/<session>.jsonl`, or a
    subagent's `<project>/<session>/subagents/…/agent-<id>.jsonl`. `project_key` names the project
    in the store instead of the folder (a scope the caller chose). None for a path outside."""
    try:
        parts = Path(os.path.relpath(file_path, projects_dir)).parts
    except ValueError:
        return None
    if len(parts) < 2 or parts[0] in ("..", "") or not parts[-1].endswith(".jsonl"):
        return None
    project = project_key or parts[0]
    if len(parts) == 2:
        return {"project_key": project, "session_id": parts[1][: -len(".jsonl")]}
    if len(parts) >= 4:
        return {
            "project_key": project,
            "session_id": parts[1],
            "subpath": "/".join([*parts[2:-1], parts[-1][: -len(".jsonl")]]),
        }
    return None


@dataclass(frozen=True)
class Materialized:
    """A session from the store in a private CLAUDE_CONFIG_DIR, laid out as claude's own, with the sign-in
    copied in: a scratch folder, so one left by a process killed before `remove` goes at the next resume."""

    folder: ScratchFolder
    session_id: str

    @property
    def config_dir(self) -> Path:
        return self.folder.path

    def remove(self) -> None:
        self.folder.remove()


async def _within(call: Awaitable[T], timeout: float, what: str) -> T:  # noqa: ASYNC109 - the error names the call
    try:
        with anyio.fail_after(timeout):
            return await call
    except TimeoutError as e:
        raise EngineError(f"the session store did not answer {what} within {timeout:g} s") from e
    except EngineError:
        raise
    except Exception as e:  # the store is the caller's code
        raise EngineError(f"the session store failed {what}: {type(e).__name__}: {e}") from e


async def latest(store: SessionStore, project_key: str, timeout: float) -> str | None:  # noqa: ASYNC109 - the error names the call
    """The most recently written main session of a project that is not a subagent's, if the store lists."""
    if not implements(store, "list_sessions"):
        return None
    listed = await _within(store.list_sessions(project_key), timeout, "list_sessions")
    for item in sorted(listed, key=lambda s: s["mtime"], reverse=True):
        entries = await _within(
            store.load({"project_key": project_key, "session_id": item["session_id"]}), timeout, "load"
        )
        if entries and not entries[0].get("isSidechain"):
            return item["session_id"]
    return None


async def materialize(
    store: SessionStore,
    session_id: str,
    *,
    project_key: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 - the error names the call
) -> Materialized | None:
    """Session `session_id` from the store, written where claude looks for it in a new private config
    directory (with the caller's credentials and settings copied in, so claude can still sign in).
    None when the store has no such session."""
    _transcripts.transcript_path(session_id, cwd, env)  # a session id that is no path component is refused
    key: SessionKey = {"project_key": project_key, "session_id": session_id}
    entries = await _within(store.load(key), timeout, f"load of session {session_id}")
    if not entries:
        return None
    subkeys: dict[str, list[Entry]] = {}
    if implements(store, "list_subkeys"):
        for subpath in await _within(store.list_subkeys(key), timeout, "list_subkeys"):
            if subpath and ".." not in subpath.split("/"):
                sub = await _within(store.load({**key, "subpath": subpath}), timeout, f"load of {subpath}")
                subkeys[subpath] = sub or []
    scratch = ScratchFolder("frobozz-claude-")
    config = scratch.path
    try:
        folder = config / "projects" / _transcripts.project_key(cwd)
        _write(folder / f"{session_id}.jsonl", entries)
        for subpath, sub in subkeys.items():
            _write(folder / session_id / f"{subpath}.jsonl", sub)
        _copy_sign_in(_transcripts.config_dir(env), Path(env.get("HOME") or Path.home()), config, env)
    except BaseException:
        scratch.remove()
        raise
    log.info(
        "session %s loaded from the store (%d entries, %d subagents) into %s",
        session_id,
        len(entries),
        len(subkeys),
        config,
    )
    return Materialized(folder=scratch, session_id=session_id)


def _write(path: Path, entries: list[Entry]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for entry in entries:
            f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")


def copy_sign_in(env: Mapping[str, str], target: Path) -> None:
    """The sign-in of the claude that `env` describes (its HOME or CLAUDE_CONFIG_DIR), copied into the claude
    config folder `target`: for a claude run elsewhere, or as another account. Called again, it mirrors the
    source as it is now (see `_copy_sign_in`)."""
    _copy_sign_in(_transcripts.config_dir(env), Path(env.get("HOME") or Path.home()), target, env)


def _copy_sign_in(source: Path, home: Path, target: Path, env: Mapping[str, str]) -> None:
    """What claude needs to sign in and behave as configured: credentials (without the refresh token, so
    a copy never rotates the user's), `.claude.json` and the user's settings.

    The copy mirrors the source each time: every file is written anew (what was changed in the copy since is
    not kept), and one gone from the source goes from the copy (a settings file the user removed, say one whose
    hook blocked every prompt, is not left behind in a copy made earlier). A source that is there but cannot be
    read just now (a credentials file being rewritten) leaves the copy as it was. `target` may belong to another
    account, which may have planted links in it: nothing is written through one (each file is written beside
    its name and renamed over it, in the folder opened without following a link)."""
    claude_json = source / ".claude.json" if env.get("CLAUDE_CONFIG_DIR") else home / ".claude.json"
    wanted = {
        ".credentials.json": _credentials(source / ".credentials.json"),
        ".claude.json": _read(claude_json),
        "settings.json": _read(source / "settings.json"),
    }
    folder = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name, content in wanted.items():
            try:
                if content is None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=folder)
                elif isinstance(content, bytes):
                    _replace(folder, name, content)
            except OSError as e:
                log.warning("%s not copied into %s: %s", name, target, e)
    finally:
        os.close(folder)


class _Unread:
    """A source that is there and could not be read: its copy is left as it was."""


_UNREAD = _Unread()


def _read(path: Path) -> bytes | _Unread | None:
    """A source file's bytes; None when it is not there (its copy goes), `_UNREAD` when it cannot be read."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as e:
        log.warning("%s is not copied (the copy is left as it was): %s", path, e)
        return _UNREAD


def _credentials(path: Path) -> bytes | _Unread | None:
    raw = _read(path)
    if not isinstance(raw, bytes):
        return raw
    try:
        data = json.loads(raw)
        if isinstance(data.get("claudeAiOauth"), dict):
            data["claudeAiOauth"].pop("refreshToken", None)
        return json.dumps(data).encode()
    except (ValueError, AttributeError) as e:
        log.warning("credentials not copied (the copy is left as it was): %s", e)
        return _UNREAD


def _replace(folder: int, name: str, content: bytes) -> None:
    """`name` in the open `folder` replaced by a new file (0600, the folder owner's: a claude of that account,
    running, reads it at once): a link there is replaced, never followed."""
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            owner = os.fstat(folder)
            if (owner.st_uid, owner.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):  # (only root may give a file away)
                    os.fchown(f.fileno(), owner.st_uid, owner.st_gid)
            f.write(content)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
