"""Hostile story files made for the tests: valid headers over code that crashes or never stops."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ZORK1_R119


def with_checksum(data: bytearray) -> bytes:
    length = int.from_bytes(data[0x1A:0x1C], "big") * 2
    data[0x1C:0x1E] = (sum(data[0x40:length]) & 0xFFFF).to_bytes(2, "big")
    return bytes(data)


def garbage_code_story(path: Path) -> Path:
    """Zork's header and tables, with every byte of code replaced by junk: passes the header check."""
    data = bytearray(ZORK1_R119.read_bytes())
    high = int.from_bytes(data[4:6], "big")
    junk = bytes((i * 7919 + 13) % 251 for i in range(len(data) - high))
    data[high:] = junk
    path.write_bytes(with_checksum(data))
    return path


def endless_loop_story(path: Path) -> Path:
    """A story whose first instruction jumps to itself: the interpreter never asks for input."""
    data = bytearray(ZORK1_R119.read_bytes())
    pc = int.from_bytes(data[6:8], "big")
    data[pc : pc + 3] = b"\x8c\xff\xff"  # jump -1: back to this same instruction
    path.write_bytes(with_checksum(data))
    return path
