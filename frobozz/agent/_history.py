"""Workspace history: in a workspace that is a git repository, the files a turn changed are committed when the
turn ends (author: the session's user; message: the turn's first line, and the session's id), one commit at a
time per workspace across sessions and instances (a Postgres advisory lock named for the workspace), so
concurrent sessions never race on the index or lose a commit. git runs as the workspace's owner."""

from __future__ import annotations

import hashlib
import logging
import os
import time
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
    done = await anyio.run_process(
        run,
        cwd=space.path,
        check=False,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(space.path),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        },
    )
    if done.returncode != 0:
        raise HistoryError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:500]}")
    return done.stdout.decode(errors="replace")


# a file modified this recently (seconds) may be written again within its clock's resolution and keep its size
# and mtime: git's "racy" case. Its state then includes its content's hash, as git's own check compares content.
RACY = 2.0
State = tuple[int, int, str | None]  # size, mtime (ns), and the content's hash when the file was racy


def _state(path: Path, now: float, hash_anyway: bool) -> State | None:
    """A file's (size, mtime, hash): the hash when the mtime is within RACY of `now` or `hash_anyway`; None when
    it is gone. Never through a link: a symlink's state is its target's name."""
    try:
        stat = path.lstat()
        digest = None
        if hash_anyway or now - stat.st_mtime_ns / 1e9 < RACY:
            hashed = hashlib.sha256()
            if path.is_symlink():
                hashed.update(os.readlink(path).encode(errors="surrogateescape"))
            elif path.is_file():
                descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # (never waits on a FIFO)
                with open(descriptor, "rb") as file:
                    for chunk in iter(lambda: file.read(1 << 20), b""):
                        hashed.update(chunk)
            digest = hashed.hexdigest()
        return stat.st_size, stat.st_mtime_ns, digest
    except OSError:
        return None


async def dirty(space: Workspace, before: dict[str, State | None] | None = None) -> dict[str, State | None]:
    """The workspace's changed and untracked files as git sees them (without taking the index's lock), each with
    its state (`_state`) or None when gone: taken before and after a Bash call, what the call changed. After
    (`before` given), a file hashed before is hashed again, so a same-size rewrite within the clock's
    resolution is seen."""
    if not is_repository(space):
        return {}
    out = await _git(space, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all")
    paths: list[str] = []
    entries = iter(out.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename or copy names its source next
            paths.append(next(entries, ""))
    earlier = before or {}

    def look() -> dict[str, State | None]:
        now = time.time()
        return {
            path: _state(space.path / path, now, (earlier.get(path) or (0, 0, None))[2] is not None)
            for path in filter(None, paths)
        }

    return await anyio.to_thread.run_sync(look)


def changed(before: dict[str, State | None], after: dict[str, State | None]) -> list[str]:
    """The files that changed between two `dirty` looks (new, written again, or gone): a file's size or mtime
    differs, or its content's hash when both looks hashed it."""
    found = []
    for path, state in after.items():
        if path not in before:
            found.append(path)
            continue
        was = before[path]
        if was is None or state is None:
            if was != state:
                found.append(path)
        elif was[:2] != state[:2] or (was[2] is not None and state[2] is not None and was[2] != state[2]):
            found.append(path)
    return found


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


async def commit(
    pool: asyncpg.Pool, space: Workspace, *, user: str, session_id: str, first_line: str, paths: list[str]
) -> str | None:
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
            await _git(
                space,
                "-c",
                f"user.name={user}",
                "-c",
                f"user.email={user}@frobozz.invalid",
                "commit",
                "--quiet",
                "--no-verify",
                "-m",
                f"{subject}\n\nsession: {session_id}",
                "--",
                *paths,
            )
            return (await _git(space, "rev-parse", "HEAD")).strip()
        finally:
            await connection.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"agent-git:{space.spec}")


async def changes(space: Workspace, session_id: str) -> list[dict[str, Any]]:
    """A session's commits, newest first: id, author, time, subject, files."""
    if not is_repository(space):
        return []
    try:
        out = await _git(
            space,
            "log",
            "--fixed-strings",
            f"--grep=session: {session_id}",
            f"--format={RECORD}%H{FIELD}%an{FIELD}%aI{FIELD}%s",
            "--name-only",
        )
    except HistoryError as e:
        if "does not have any commits" in str(e):
            return []
        raise
    found = []
    for record in out.split(RECORD)[1:]:
        head, _, files = record.partition("\n")
        commit_id, author, when, subject = head.split(FIELD)
        found.append(
            {
                "commit": commit_id,
                "author": author,
                "time": when,
                "message": subject,
                "files": [f for f in files.splitlines() if f],
            }
        )
    return found
