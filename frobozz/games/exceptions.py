"""Errors of the games part: one root, with the fields a caller needs to report them."""

from __future__ import annotations


class GameError(Exception):
    """Root of every error the games part raises on purpose."""


class StoryFileError(GameError):
    """A file that is missing, unreadable or not a Z-machine story (refused before any interpreter)."""


class GameNotFoundError(GameError):
    """No catalogue entry or story file answers to the name asked for."""


class CommandError(GameError):
    """A command refused before it reached the interpreter (empty, too long, control characters)."""


class SaveError(GameError):
    """A save slot that is invalid, missing, corrupt or belongs to another story."""


class GameSessionClosedError(GameError):
    """The session was ended; start a new game."""


class InterpreterCrashedError(GameError):
    """The interpreter's worker process died; the session was put back to its last good turn."""

    def __init__(self, message: str, *, exit_code: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class InstallError(GameError):
    """A download that failed or whose checksum does not match the catalogue."""
