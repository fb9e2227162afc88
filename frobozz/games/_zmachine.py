"""Read a running game's status from Z-machine memory, for story files jericho does not know.

Version 1-3 games keep the status line in the first three globals (location object, score,
moves); Inform keeps the same three globals in later versions too. Object names are Z-strings
in the object table. Everything here is pure: it reads bytes handed to it.
"""

from __future__ import annotations

from dataclasses import dataclass

_A0 = "abcdefghijklmnopqrstuvwxyz"
_A1 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_A2 = " \n0123456789.,!?_#'\"/\\-:()"  # index 0 is the 10-bit escape, index 1 a newline (v2+)


@dataclass(frozen=True)
class ZStatus:
    location: str | None
    score: int | None
    moves: int | None


class ZMemory:
    """The game's current memory: its dynamic part from the interpreter, the rest from the story."""

    def __init__(self, ram: bytes, story: bytes) -> None:
        self.version = story[0]
        self.mem = bytes(ram) + story[len(ram) :]
        self._abbreviations = self.word(0x18)
        self._alphabets = self._read_alphabets()

    def word(self, addr: int) -> int:
        return int.from_bytes(self.mem[addr : addr + 2], "big")

    def global_var(self, n: int) -> int:
        return self.word(self.word(0x0C) + 2 * n)

    def _read_alphabets(self) -> tuple[str, str, str]:
        table = self.word(0x34) if self.version >= 5 else 0
        if not table:
            return _A0, _A1, _A2
        chars = "".join(chr(b) if 32 <= b < 127 else "?" for b in self.mem[table : table + 78])
        return chars[:26], chars[26:52], " \n" + chars[54:78]

    # -- objects ---------------------------------------------------------------------------
    def object_count_limit(self) -> int:
        return 255 if self.version <= 3 else 65535

    def object_name(self, n: int) -> str | None:
        if not 0 < n <= self.object_count_limit():
            return None
        base = self.word(0x0A)
        if self.version <= 3:
            entry = base + 31 * 2 + (n - 1) * 9
            props = self.word(entry + 7)
        else:
            entry = base + 63 * 2 + (n - 1) * 14
            props = self.word(entry + 12)
        if not 0 < props < len(self.mem) or self.mem[props] == 0:
            return None
        name = self.decode(props + 1, max_words=self.mem[props]).strip()
        return name or None

    # -- Z-strings -------------------------------------------------------------------------
    def decode(self, addr: int, *, max_words: int = 256, depth: int = 0) -> str:
        zchars: list[int] = []
        for _ in range(max_words):
            if addr + 1 >= len(self.mem):
                break
            w = self.word(addr)
            addr += 2
            zchars += [(w >> 10) & 31, (w >> 5) & 31, w & 31]
            if w & 0x8000:
                break
        out: list[str] = []
        alphabet = 0
        i = 0
        while i < len(zchars):
            c = zchars[i]
            i += 1
            if c == 0:
                out.append(" ")
            elif c in (1, 2, 3) and (self.version >= 3 or (c == 1 and self.version == 2)):
                if i < len(zchars) and depth == 0:
                    index = 32 * (c - 1) + zchars[i]
                    # The abbreviation table holds word addresses.
                    out.append(self.decode(self.word(self._abbreviations + 2 * index) * 2, depth=1))
                i += 1
            elif c in (4, 5):
                alphabet = c - 3
                continue
            elif alphabet == 2 and c == 6:
                if i + 1 < len(zchars):
                    code = (zchars[i] << 5) | zchars[i + 1]
                    out.append(chr(code) if 32 <= code < 127 else "?")
                i += 2
            else:
                out.append(self._alphabets[alphabet][c - 6])
            alphabet = 0
        return "".join(out)

    # -- status ----------------------------------------------------------------------------
    def status(self) -> ZStatus:
        location = self.object_name(self.global_var(0))
        flags = self.mem[1]
        if self.version <= 3 and flags & 0x02:
            return ZStatus(location, None, None)  # a "time" game: globals 1-2 are hours and minutes
        score = self.global_var(1)
        return ZStatus(location, score - 0x10000 if score & 0x8000 else score, self.global_var(2))
