"""The dialogue's errors: one root; what a caller shows the user is the message."""

from __future__ import annotations


class DialogueError(Exception):
    """Root of every error the dialogue part raises on purpose."""


class DialogueInputError(DialogueError):
    """A prompt file, a question or an option that cannot start a dialogue (nothing was written)."""


class DialogueFileError(DialogueError):
    """A dialogue directory whose files are broken or do not belong together (nothing was changed)."""


class TurnError(DialogueError):
    """A turn claude could not finish (an API error, a dead process): the dialogue stops, resumable."""
