"""Things that watch a session's output stream."""

from ._archive import TranscriptArchive
from ._broadcast import Broadcast

__all__ = ["Broadcast", "TranscriptArchive"]
