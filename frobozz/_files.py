"""Files and folders every part needs (written whole, or scratch that outlives no crash): a leaf module that
imports nothing of Frobozz."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import stat
import tempfile
import weakref
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


_OWNER = ".owner"  # in a scratch folder: its maker holds a lock on it for as long as it lives


class ScratchFolder:
    """A private temporary folder (`path`) that `remove()` removes (or, as a TemporaryDirectory, its garbage
    collection or the interpreter's exit), or, when its process was killed first (SIGKILL runs no clean-up),
    the next ScratchFolder made with the same prefix: its maker holds a lock on a file in it, which the kernel
    lets go when the process dies, so a folder whose lock can be had is an orphan. Folders of another account
    are left alone (root's sweep takes everyone's orphans)."""

    def __init__(self, prefix: str) -> None:
        sweep_orphans(prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        lock = -1
        try:
            fresh = self.path / f"{_OWNER}.new"  # named .owner only once locked: a sweep never sees it unlocked
            lock = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)
            fresh.rename(self.path / _OWNER)
        except BaseException:
            _remove(self.path, lock)
            raise
        self._finalizer = weakref.finalize(self, _remove, self.path, lock)

    def remove(self) -> None:
        self._finalizer()  # once: a second call does nothing


def _remove(path: Path, lock: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if lock >= 0:
        os.close(lock)


def sweep_orphans(prefix: str) -> list[Path]:
    """Remove the scratch folders named `prefix…` in the temporary folder whose makers have died; returns them."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{glob.escape(prefix)}*"):
        try:
            info = folder.lstat()
            if not stat.S_ISDIR(info.st_mode) or (os.geteuid() != 0 and info.st_uid != os.geteuid()):
                continue
            fd = os.open(folder / _OWNER, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # gone, not ours, or still being made
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its maker lives
        else:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            os.close(fd)
    return removed
