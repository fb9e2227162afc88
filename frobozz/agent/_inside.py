"""The service's own writes into a workspace (synced skills, attached documents), never through a link.

The workspace belongs to its user, whose claude may plant a link anywhere in it; the service may be root.
So every write goes through file descriptors: each folder on the way is opened with O_NOFOLLOW relative
to the one before (no path is looked up twice, so a link swapped in between a check and a write is no
way out either), and what the service makes is given to the workspace's owner as it is made."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .exceptions import WorkspaceError

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


@contextmanager
def folder(root: Path, parts: tuple[str, ...], owner: tuple[int, int] | None) -> Iterator[int]:
    """A descriptor of `root/parts…`, each folder made if missing (and given to `owner`); a link or a file on
    the way is refused."""
    fd = os.open(root, _FOLDER)
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                pass
            try:
                inner = os.open(part, _FOLDER, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise WorkspaceError(
                        f"{part} in {root} is a link or a file; the service writes only into folders of the workspace"
                    ) from None
                raise
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def write(fd: int, name: str, data: bytes, owner: tuple[int, int] | None) -> None:
    """The file `name` in the folder `fd`, replaced; a link of that name is refused, never followed."""
    try:
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=fd)
    except OSError as e:
        raise WorkspaceError(f"cannot write {name} in the workspace: {e.strerror}") from e
    with os.fdopen(out, "wb") as f:
        if owner is not None:
            os.fchown(f.fileno(), *owner)
        f.write(data)


def kind(fd: int, name: str) -> str | None:
    """ "dir", "file", "link" (or anything else that is not a folder), or None when there is nothing."""
    try:
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    return "dir" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "file"


def remove(fd: int, name: str) -> None:
    """`name` in `fd` gone: a folder with all it holds (shutil's rmtree on descriptors), or the link itself."""
    if kind(fd, name) == "dir":
        shutil.rmtree(name, dir_fd=fd)
    elif kind(fd, name) is not None:
        os.unlink(name, dir_fd=fd)


def copy_tree(source: Path, fd: int, name: str, owner: tuple[int, int] | None) -> None:
    """The folder `source` (the platform's or the user's) copied to `name` in `fd`; links in it are left out."""
    os.mkdir(name, 0o755, dir_fd=fd)
    if owner is not None:
        os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)
    inner = os.open(name, _FOLDER, dir_fd=fd)
    try:
        for entry in sorted(source.iterdir()):
            if entry.is_symlink():
                continue
            if entry.is_dir():
                copy_tree(entry, inner, entry.name, owner)
            elif entry.is_file():
                write(inner, entry.name, _read(entry), owner)
    finally:
        os.close(inner)


def _read(path: Path) -> bytes:
    """A source file's bytes; a link swapped in since it was listed is not followed (a user's skills folder is
    theirs, and the service, perhaps root, must not copy what a link points at into their workspace)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        return f.read()


def read_json(fd: int, name: str) -> Any:
    """JSON the service wrote itself (a manifest); None when missing, a link or not JSON."""
    try:
        raw = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(raw, "rb") as f:
        try:
            return json.loads(f.read())
        except ValueError:
            return None
