"""File writing every part needs: a leaf module that imports nothing of Frobozz."""

from __future__ import annotations

import contextlib
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
