"""Download a catalogued game, check it, and put it in the user's games directory."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from frobozz._files import atomic_write
from frobozz._tls import tls_context

from ._catalogue import CATALOGUE, CatalogueEntry
from ._story import MAX_STORY_BYTES, StoryInfo, parse_story, read_story
from .exceptions import InstallError, StoryFileError

if TYPE_CHECKING:
    import httpx


def catalogue_entry(name: str) -> CatalogueEntry:
    try:
        return CATALOGUE[name.strip().lower()]
    except KeyError:
        raise InstallError(f"no game {name[:80]!r} in the catalogue (known: {', '.join(CATALOGUE)})") from None


async def download(url: str, *, client: httpx.AsyncClient | None = None, timeout: float = 30.0) -> bytes:  # noqa: ASYNC109 - httpx's own, per read
    """The body at `url`, refused past MAX_STORY_BYTES without reading the rest."""
    import httpx  # here, not at the top: the interpreter's worker process imports this package and never downloads

    own = client is None
    client = client or httpx.AsyncClient(timeout=timeout, follow_redirects=True, verify=tls_context())
    try:
        async with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise InstallError(f"download of {url} failed: HTTP {response.status_code}")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_STORY_BYTES:
                    raise InstallError(f"download of {url} is larger than any story file; refused")
                chunks.append(chunk)
            return b"".join(chunks)
    except (httpx.HTTPError, httpx.InvalidURL) as e:  # (InvalidURL, as --url 'http://[::1' is, is no HTTPError)
        raise InstallError(f"download of {url[:200]} failed: {e}") from e
    finally:
        if own:
            await client.aclose()


def installed_copy(name: str, folders: Sequence[Path]) -> StoryInfo | None:
    """The catalogued game's very story (by md5) in the first of `folders` that has it; None when none has (a
    damaged or other copy is passed over)."""
    entry = catalogue_entry(name)
    for folder in folders:
        there = folder / entry.file_name
        if there.is_file():
            try:
                story = read_story(there)
            except StoryFileError:
                continue  # damaged: downloaded again
            if story.md5 == entry.md5:
                return story
    return None


async def install(
    name: str, games_dir: Path, *, url: str | None = None, client: httpx.AsyncClient | None = None
) -> StoryInfo:
    """Install a catalogued game into `games_dir` (verified by md5); a no-op when already there."""
    entry = catalogue_entry(name)
    target = games_dir / entry.file_name
    if story := installed_copy(name, [games_dir]):
        return story
    data = await download(url or entry.url, client=client)
    got = hashlib.md5(data).hexdigest()
    if got == entry.source_md5:
        data = entry.finish(data)
    elif got != entry.md5:  # the finished story file itself (as `games verify` and `games list` give it) is taken
        expected = (
            f"md5 {entry.md5}"
            if entry.source_md5 == entry.md5
            else f"the story file (md5 {entry.md5}) or the original it is padded from (md5 {entry.source_md5})"
        )
        raise InstallError(
            f"{entry.name}: downloaded file has md5 {got}, the catalogue expects {expected}; nothing was installed"
        )
    story = parse_story(data, target)
    if story.md5 != entry.md5:
        raise InstallError(f"{entry.name}: finished file has md5 {story.md5}, expected {entry.md5}")
    try:
        atomic_write(target, data)
    except OSError as e:
        raise InstallError(f"{entry.name} could not be written to {games_dir}: {e.strerror or e}") from e
    return story
