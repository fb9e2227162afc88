"""Find story files by name in the games directories, and list what is there."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ._catalogue import CATALOGUE, by_md5
from ._story import STORY_SUFFIXES, StoryInfo, read_story
from .exceptions import GameNotFoundError, StoryFileError
from .settings import GamesSettings

_MAX_NAME = 255
log = logging.getLogger("frobozz.games")


@dataclass(frozen=True)
class GameListing:
    name: str
    title: str
    file_name: str
    installed: bool
    path: str | None
    license: str | None
    max_score: int | None
    damaged: str | None = None  # why the file at `path` is no story file (then not `installed`); None when it is
    catalogued: bool = True  # False: a file found in a games directory, not one of the catalogue's

    @property
    def fix(self) -> str | None:
        """What to do about a damaged file (None: it is not): a catalogued game is installed again; any other
        file is replaced by a good copy (`games install` knows only the catalogue's)."""
        if not self.damaged:
            return None
        if self.catalogued:
            return f"remove it, or run `frobozz games install {self.name}`"
        return "remove it, or put a good copy of the story file in its place (`frobozz games verify FILE` checks one)"


def jericho_supports(md5: str) -> bool:
    """Whether jericho knows this exact story file (score, moves, walkthrough come from it)."""
    from jericho import defines

    return md5 in defines.BINDINGS_DICT


def walkthrough_for(md5: str) -> list[str]:
    """jericho's walkthrough for this exact story file, or [] when it has none."""
    from jericho import defines

    steps = defines.BINDINGS_DICT.get(md5, {}).get("walkthrough", "")
    return steps.split("/") if steps else []


def _usable(copies: list[Path]) -> Path:
    """The first of a file's copies that is a story file (as `find` plays it), else the first (listed for what
    it is: `games verify` says what is wrong with it)."""
    if len(copies) > 1:
        for path in copies:
            try:
                read_story(path)
                return path
            except StoryFileError:
                continue
    return copies[0]


class GameLibrary:
    """Lookup order: an explicit path (when allowed), FROBOZZ_GAMES_DIR, then the data directory."""

    def __init__(self, settings: GamesSettings) -> None:
        self.settings = settings

    def save_slots(self, game: str) -> list[str]:
        """The save slots kept for a game (by any session of it): they are the story file's, not a session's."""
        from ._saves import SaveStore

        return [save.slot for save in SaveStore(self.settings.saves_dir, self.find(game).md5).list()]

    @property
    def directories(self) -> list[Path]:
        dirs = [self.settings.games_dir] if self.settings.games_dir else []
        return [d for d in (*dirs, self.settings.installed_games_dir) if d.is_dir()]

    def find(self, name: str, *, allow_path: bool = False) -> StoryInfo:
        """The validated story for a catalogue name or a file name (with or without extension)."""
        if not isinstance(name, str) or not name.strip():
            raise GameNotFoundError("no game named: give a catalogue name such as 'zork1' or a story file name")
        name = name.strip()
        if allow_path and ("/" in name or Path(name).is_file()):
            return read_story(name)
        if (
            len(name) > _MAX_NAME
            or any(c in name for c in "/\\\0")
            or name.startswith(".")
            or any(ord(c) < 32 for c in name)
        ):
            raise GameNotFoundError(
                f"{name[:80]!r} is not a game name: give a catalogue name or the name of a story file "
                "in the games directories, not a path"
            )
        entry = CATALOGUE.get(name.lower())
        candidates = [entry.file_name] if entry else []
        candidates += [name] + [name + suffix for suffix in STORY_SUFFIXES]
        unusable: list[StoryFileError] = []  # copies passed over: damaged, cut short, or pointing out
        for directory in self.directories:
            root = directory.resolve()
            for candidate in candidates:
                path = directory / candidate
                if not path.is_file():
                    continue
                if not path.resolve().is_relative_to(root):
                    unusable.append(StoryFileError(f"{candidate} points outside the games directory {directory}"))
                    continue
                try:
                    story = read_story(path)
                except StoryFileError as e:
                    unusable.append(StoryFileError(f"{e} (in {directory})"))
                    continue
                for passed in unusable:
                    log.warning("game %r: a copy passed over: %s", name, passed)
                return story
        if unusable:
            raise unusable[0]
        hint = f"; `frobozz games install {entry.name}` downloads it" if entry else ""
        where = ", ".join(str(d) for d in self.directories) or "no games directory exists yet"
        raise GameNotFoundError(f"no game {name!r} found (looked in: {where}){hint}")

    def stories(self) -> list[StoryInfo]:
        """Every readable story file in the games directories (catalogued or not): what a worker or a
        server on this machine can play, whatever its file is called here."""
        found = []
        for listing in self.listing():
            if listing.path:
                try:
                    found.append(read_story(listing.path))
                except StoryFileError:
                    continue
        return found

    def listing(self) -> list[GameListing]:
        """Catalogue entries, installed or not, then any other story files in the games directories (those that
        cannot be played too, said `damaged`)."""
        copies: dict[str, list[Path]] = {}
        for directory in self.directories:  # earlier directories first
            for path in sorted(directory.iterdir()):
                if path.suffix.lower() in STORY_SUFFIXES and path.is_file():
                    copies.setdefault(path.name, []).append(path)
        found = {name: _usable(paths) for name, paths in copies.items()}
        games = []
        for entry in CATALOGUE.values():
            installed = found.pop(entry.file_name, None)
            damaged = None
            if installed is not None:
                try:  # as `find` and `play` check it (a story file's checksum is cheap: a few ms)
                    read_story(installed)
                except StoryFileError as e:
                    damaged = str(e)
            games.append(
                GameListing(
                    entry.name,
                    entry.title,
                    entry.file_name,
                    installed is not None and damaged is None,
                    str(installed) if installed else None,
                    entry.license,
                    entry.max_score,
                    damaged,
                )
            )
        for file_name, path in sorted(found.items()):
            try:
                story = read_story(path)
            except StoryFileError as e:  # listed for what it is, as a damaged catalogued one is (it was left out)
                games.append(
                    GameListing(
                        path.stem,
                        f"{path.name} (not a playable story file)",
                        file_name,
                        False,
                        str(path),
                        None,
                        None,
                        str(e),
                        catalogued=False,
                    )
                )
                continue
            known = by_md5(story.md5)
            games.append(
                GameListing(
                    path.stem,
                    f"{path.name} ({story.describe()})",
                    file_name,
                    True,
                    str(path),
                    known.license if known else None,
                    known.max_score if known else None,
                )
            )
        return games
