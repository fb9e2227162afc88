"""Things that watch a session's output stream."""

from ._archive import TranscriptArchive
from ._broadcast import Broadcast
from ._handoff import HandoffLetter, HandoffRelay, HandoffStep

__all__ = ["Broadcast", "HandoffLetter", "HandoffRelay", "HandoffStep", "TranscriptArchive"]
