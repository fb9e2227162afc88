"""Scratch folders that outlive no crash (a leaf module: it imports only other leaf modules).

A TemporaryDirectory is removed by its process, so one whose process is killed with SIGKILL stays in the
temporary folder for ever (a game's interpreter folder, a resumed session's claude config with the sign-in
copied in). A ScratchFolder's maker holds an flock on a file in it, which the kernel lets go when the
process dies however it dies; the next ScratchFolder made with the same prefix removes every folder whose
lock it can take. flock, not a pid: a lock belongs to an open file, so pid reuse and pid namespaces sharing
one /tmp cannot fool it."""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import stat
import tempfile
import weakref
from pathlib import Path

from ._files import locked_file

log = logging.getLogger("frobozz.scratch")
LOCK_FILE = ".owner"  # in a scratch folder: its maker holds a lock on it for as long as it lives


class ScratchFolder:
    """A private temporary folder, `path`, that `remove()` removes (or, as a TemporaryDirectory, its garbage
    collection or the interpreter's exit), and the next one made with its prefix when its process was killed
    first."""

    def __init__(self, prefix: str) -> None:
        sweep_orphans(prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self.lock_file = self.path / LOCK_FILE
        try:
            lock = locked_file(self.lock_file)  # (a sweep never finds it unlocked while this process lives)
        except BaseException:
            _remove(self.path, -1, os.getpid())
            raise
        self._finalizer = weakref.finalize(self, _remove, self.path, lock, os.getpid())

    def __repr__(self) -> str:
        return f"ScratchFolder({str(self.path)!r})"

    def remove(self) -> None:
        self._finalizer()  # once: a second call does nothing


def _remove(path: Path, lock: int, maker: int) -> None:
    try:
        if os.getpid() == maker:  # a forked child that exits leaves its parent's folder alone
            _clear(path)
    finally:
        if lock >= 0:
            os.close(lock)


def _clear(folder: Path) -> bool:
    """Remove `folder`, its lock file last (one that could not be emptied is still an orphan to the next
    sweep); True when it is gone. What cannot be removed is logged, never raised: another process's debris
    (a RecursionError from rmtree on a tree 1000 deep, on Python 3.11) never stops a new folder or a close."""
    try:
        for name in os.listdir(folder):
            if name != LOCK_FILE:
                entry = folder / name
                if stat.S_ISDIR(entry.lstat().st_mode):
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        (folder / LOCK_FILE).unlink(missing_ok=True)
        folder.rmdir()
    except Exception as e:  # noqa: BLE001 - see above
        if not os.path.lexists(folder):
            return True  # gone all the same (another sweep took it)
        log.warning("could not remove the scratch folder %s: %r", folder, e)
        return False
    return True


def sweep_orphans(prefix: str) -> list[Path]:
    """Remove the scratch folders named `prefix…` in the temporary folder whose makers have died; returns them.
    Only folders whose lock file is this account's (root's sweep leaves every other account's alone), and
    never through a symlink; what cannot be removed is logged and passed over."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{glob.escape(prefix)}*"):
        try:
            if not stat.S_ISDIR(folder.lstat().st_mode):
                continue
            # O_NONBLOCK: a FIFO put in its place must not hang the sweep (it is then passed over, not regular)
            fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone, another account's, or not yet locked
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its maker lives
            if _clear(folder):
                removed.append(folder)
        finally:
            os.close(fd)
    return removed
