"""Story-file catalogue, install and verification, and the jericho-backed game session."""

from ._catalogue import CATALOGUE, CatalogueEntry, by_md5
from ._install import install, installed_copy
from ._journal import replay as replay_journal
from ._layout import GridLayout, PassageKind, PlacedPassage, count_crossings, grid_layout, through_rooms
from ._library import GameLibrary, GameListing, jericho_supports, walkthrough_for
from ._map import GameMap, MapFormat, Passage, direction, mentioned_exits
from ._saves import SaveInfo
from ._session import MAX_COMMAND_CHARS, NOT_SENT, GameSession, GameSessionState, check_command
from ._story import StoryInfo, parse_story, read_story
from ._text import memory_queries
from ._turns import Turn
from .exceptions import (
    CommandError,
    GameError,
    GameNotFoundError,
    GameSessionClosedError,
    InstallError,
    InterpreterCrashedError,
    SaveError,
    StoryFileError,
)
from .settings import GamesSettings

__all__ = [
    "CATALOGUE",
    "MAX_COMMAND_CHARS",
    "NOT_SENT",
    "CatalogueEntry",
    "CommandError",
    "GameError",
    "GameLibrary",
    "GameListing",
    "GameMap",
    "GameNotFoundError",
    "GameSession",
    "GameSessionClosedError",
    "GameSessionState",
    "GamesSettings",
    "GridLayout",
    "InstallError",
    "InterpreterCrashedError",
    "MapFormat",
    "Passage",
    "PassageKind",
    "PlacedPassage",
    "SaveError",
    "SaveInfo",
    "StoryFileError",
    "StoryInfo",
    "Turn",
    "by_md5",
    "check_command",
    "count_crossings",
    "direction",
    "grid_layout",
    "install",
    "installed_copy",
    "jericho_supports",
    "memory_queries",
    "mentioned_exits",
    "parse_story",
    "read_story",
    "replay_journal",
    "through_rooms",
    "walkthrough_for",
]
