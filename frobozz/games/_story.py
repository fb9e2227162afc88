"""Story-file validation: read and check a Z-machine header before any interpreter sees the file.

A truncated or hostile file can make the interpreter exit its whole process, so every check a
header allows is made here, in the caller's process, from the bytes alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .exceptions import StoryFileError

STORY_SUFFIXES = (".z1", ".z2", ".z3", ".z4", ".z5", ".z6", ".z7", ".z8", ".dat")
MAX_STORY_BYTES = 512 * 1024
_HEADER_BYTES = 64
# How the header's file-length word is scaled, and the largest story each version allows.
_LENGTH_SCALE = {1: 2, 2: 2, 3: 2, 4: 4, 5: 4, 6: 8, 7: 8, 8: 8}
_MAX_BYTES = {
    1: 128 * 1024,
    2: 128 * 1024,
    3: 128 * 1024,
    4: 256 * 1024,
    5: 256 * 1024,
    6: 512 * 1024,
    7: 512 * 1024,
    8: 512 * 1024,
}


@dataclass(frozen=True)
class StoryInfo:
    """What a story file's header says about it, and what it is on disk."""

    path: Path
    version: int
    release: int
    serial: str
    checksum: int
    length: int
    size: int
    md5: str

    @property
    def name(self) -> str:
        return self.path.stem

    def describe(self) -> str:
        return f"Z-machine v{self.version}, release {self.release}, serial {self.serial}"


def _word(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 2], "big")


def parse_story(data: bytes, path: Path) -> StoryInfo:
    """Check `data` is a whole, consistent Z-machine story; raise StoryFileError saying why not."""
    where = path.name
    if len(data) < _HEADER_BYTES:
        raise StoryFileError(f"{where} is not a Z-machine story file: {len(data)} bytes is shorter than a header")
    version = data[0]
    if version not in _LENGTH_SCALE:
        raise StoryFileError(f"{where} is not a Z-machine story file: version byte {version} is not 1-8")
    if len(data) > _MAX_BYTES[version] + 64 * 1024:
        raise StoryFileError(f"{where} is too large for a v{version} story ({len(data)} bytes)")
    serial_bytes = data[0x12:0x18]
    if not all(0x20 <= b < 0x7F for b in serial_bytes):
        raise StoryFileError(f"{where} is not a Z-machine story file: its serial number is not text")
    length = _word(data, 0x1A) * _LENGTH_SCALE[version] or len(data)
    if length > len(data):
        raise StoryFileError(f"{where} is truncated: its header declares {length} bytes but the file has {len(data)}")
    high, pc, dictionary, objects, globals_, static = (_word(data, o) for o in (4, 6, 8, 10, 12, 14))
    if not _HEADER_BYTES <= static <= length or not 0 < high <= length:
        raise StoryFileError(f"{where} is not a Z-machine story file: its memory map is inconsistent")
    if any(not _HEADER_BYTES <= a < length for a in (dictionary, objects, globals_)):
        raise StoryFileError(f"{where} is not a Z-machine story file: its tables lie outside the file")
    if version != 6 and not 0 < pc < length:
        raise StoryFileError(f"{where} is not a Z-machine story file: its start address lies outside the file")
    checksum = _word(data, 0x1C)
    if checksum and sum(data[_HEADER_BYTES:length]) & 0xFFFF != checksum:
        raise StoryFileError(f"{where} is corrupt: its checksum does not match its contents")
    return StoryInfo(
        path=path,
        version=version,
        release=_word(data, 2),
        serial=serial_bytes.decode("ascii"),
        checksum=checksum,
        length=length,
        size=len(data),
        md5=hashlib.md5(data).hexdigest(),
    )


def read_story(path: str | Path) -> StoryInfo:
    """Read and validate the story file at `path`."""
    path = Path(path)
    try:
        if not path.is_file():
            raise StoryFileError(f"no story file at {path}")
        size = path.stat().st_size
        if size > MAX_STORY_BYTES:
            raise StoryFileError(f"{path.name} is {size} bytes: larger than any Z-machine story")
        data = path.read_bytes()
    except OSError as e:
        raise StoryFileError(f"cannot read {path}: {e.strerror or e}") from e
    return parse_story(data, path.resolve())
