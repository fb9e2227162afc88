"""The games Frobozz knows by name, where a user's machine gets them, and how to check them."""

from __future__ import annotations

from dataclasses import dataclass

_ZORK1 = "https://raw.githubusercontent.com/historicalsource/zork1"


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    title: str
    file_name: str
    md5: str
    version: int
    release: int
    serial: str
    license: str
    url: str
    source_md5: str
    max_score: int | None
    pad_to: int | None = None  # jericho's copies are padded: NULs to a 512-byte boundary, then '^'

    def finish(self, downloaded: bytes) -> bytes:
        """Turn the downloaded bytes into the catalogued story file (padding where it is padded)."""
        if self.pad_to is None:
            return downloaded
        padded = downloaded + b"\0" * (-len(downloaded) % 512)
        return padded + b"^" * (self.pad_to - len(padded))


CATALOGUE: dict[str, CatalogueEntry] = {
    e.name: e
    for e in (
        CatalogueEntry(
            name="zork1",
            title="Zork I: The Great Underground Empire (release 88)",
            file_name="zork1.z5",
            md5="b732a93a6244ddd92a9b9a3e3a46c687",
            version=3,
            release=88,
            serial="840726",
            license="MIT",
            url=f"{_ZORK1}/34cc828c4fa3b5e2581ea24c43bb8acb386d25d0/zork1.zip",
            source_md5="dcafbb901b39841013a54f160bd170d5",
            max_score=350,
            pad_to=92160,
        ),
        CatalogueEntry(
            name="zork1-r119",
            title="Zork I: The Great Underground Empire (release 119)",
            file_name="zork1-r119.z3",
            md5="1d4606016ea58ee038da53d994392323",
            version=3,
            release=119,
            serial="880429",
            license="MIT",
            url=f"{_ZORK1}/97b7b3d68c075dd9af7da499c3e9690ada3471fd/COMPILED/zork1.z3",
            source_md5="1d4606016ea58ee038da53d994392323",
            max_score=350,
        ),
    )
}


def by_md5(md5: str) -> CatalogueEntry | None:
    """The catalogue's entry for a story file with this MD5, or None for a story it does not know."""
    return next((e for e in CATALOGUE.values() if e.md5 == md5), None)
