"""Workspace history: in a workspace that is a git repository, the files a turn changed are committed when the
turn ends (author: the session's user; message: the turn's first line, and the session's id), one commit at a
time per workspace across sessions and instances (a Postgres advisory lock named for the workspace), so
concurrent sessions never race on the index or lose a commit. git runs as the workspace's owner."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import asyncpg

from frobozz._children import as_account, dying_with_parent

from ._workspaces import Workspace
from .exceptions import HistoryError

log = logging.getLogger("frobozz.agent.history")
RECORD, FIELD = "\x1e", "\x1f"


def is_repository(space: Workspace) -> bool:
    return (space.path / ".git").is_dir() and not (space.path / ".git").is_symlink()


async def _git(space: Workspace, *args: str) -> str:
    command = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", *args]
    run = as_account(command, *space.account) if space.account is not None else dying_with_parent(command)
    if run is None:
        raise HistoryError("git cannot run as the workspace's owner here (no setpriv)")
    done = await anyio.run_process(run, cwd=space.path, check=False, env={
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(space.path), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    if done.returncode != 0:
        raise HistoryError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:500]}")
    return done.stdout.decode(errors="replace")


async def dirty(space: Workspace) -> dict[str, tuple[int, int] | None]:
    """The workspace's changed and untracked files as git sees them (without taking the index's lock), each with
    its (size, mtime) or None when gone: taken before and after a Bash call, what the call changed."""
    if not is_repository(space):
        return {}
    out = await _git(space, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all")
    found: dict[str, tuple[int, int] | None] = {}
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths = [entry[3:]]
        if entry[0] in "RC":  # a rename or copy names its source next
            paths.append(next(entries, ""))
        for path in filter(None, paths):
            try:
                stat = (space.path / path).lstat()
                found[path] = (stat.st_size, stat.st_mtime_ns)
            except OSError:
                found[path] = None
    return found


def changed(before: dict[str, tuple[int, int] | None], after: dict[str, tuple[int, int] | None]) -> list[str]:
    """The files that changed between two `dirty` looks (new, written again, or gone)."""
    return [path for path, state in after.items() if path not in before or before[path] != state]


def turn_files(space: Workspace, targets: Iterable[str]) -> list[str]:
    """The targets that are files in the workspace (outside .git), relative to it, each once."""
    found: list[str] = []
    for target in targets:
        path = Path(target) if Path(target).is_absolute() else space.path / target
        try:
            relative = path.resolve().relative_to(space.path)
        except (ValueError, OSError):
            continue
        if relative.parts and relative.parts[0] != ".git" and str(relative) not in found:
            found.append(str(relative))
    return found


async def commit(pool: asyncpg.Pool, space: Workspace, *, user: str, session_id: str, first_line: str,
                 paths: list[str]) -> str | None:
    """Commit `paths` (those the turn changed) under the workspace's lock; the commit's id, or None when the
    workspace is no repository or nothing changed."""
    if not paths or not is_repository(space):
        return None
    subject = " ".join(first_line.split())[:120] or "(no text)"
    async with pool.acquire() as connection:
        await connection.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", f"agent-git:{space.spec}")
        try:
            await _git(space, "add", "--all", "--", *paths)
            if not (await _git(space, "diff", "--cached", "--name-only", "--", *paths)).strip():
                return None
            await _git(space, "-c", f"user.name={user}", "-c", f"user.email={user}@frobozz.invalid", "commit",
                       "--quiet", "--no-verify", "-m", f"{subject}\n\nsession: {session_id}", "--", *paths)
            return (await _git(space, "rev-parse", "HEAD")).strip()
        finally:
            await connection.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"agent-git:{space.spec}")


async def changes(space: Workspace, session_id: str) -> list[dict[str, Any]]:
    """A session's commits, newest first: id, author, time, subject, files."""
    if not is_repository(space):
        return []
    try:
        out = await _git(space, "log", "--fixed-strings", f"--grep=session: {session_id}",
                         f"--format={RECORD}%H{FIELD}%an{FIELD}%aI{FIELD}%s", "--name-only")
    except HistoryError as e:
        if "does not have any commits" in str(e):
            return []
        raise
    found = []
    for record in out.split(RECORD)[1:]:
        head, _, files = record.partition("\n")
        commit_id, author, when, subject = head.split(FIELD)
        found.append({"commit": commit_id, "author": author, "time": when, "message": subject,
                      "files": [f for f in files.splitlines() if f]})
    return found
