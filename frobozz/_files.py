"""File writing every part needs: a leaf module that imports nothing of Frobozz."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` (its folder made if missing) so that a crash leaves the old file or the new one,
    never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "w", **options: Any) -> Iterator[IO[Any]]:
    """A file for writing that takes `path`'s place only when the block ends without an error: it is written
    beside it under a temporary name, so a failure or a crash halfway leaves the old file as it was (and its
    permissions go to the new one; a new file is its owner's only). Opening it fails (OSError) when `path`'s
    folder is missing or cannot be written. For a regular file only: a pipe or a device at `path` would be
    replaced by a file, and a hard link to it is not kept."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **options) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def locked_file(path: Path) -> int:
    """A new file at `path` whose flock this process holds through the descriptor returned: the kernel lets go
    when it is closed or the process dies, however it dies (a lock belongs to an open file, so neither pid reuse
    nor pid namespaces can fool it). Made under another name and renamed to `path` only once locked, so a file
    found at `path` that cannot be locked has a live maker, and one that can has none. OSError when it cannot
    be made."""
    fresh = path.with_name(f"{path.name}.new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(fresh, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            fresh.unlink()
        raise
    return fd
