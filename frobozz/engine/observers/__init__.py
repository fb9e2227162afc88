"""Things that watch a session's output stream."""

from ._archive import TranscriptArchive
from ._broadcast import Broadcast
from ._handoff import HandoffLetter, HandoffRelay, HandoffStep, handoff_span
from ._tool_log import ToolCall, ToolLog

__all__ = ["Broadcast", "HandoffLetter", "HandoffRelay", "HandoffStep", "ToolCall", "ToolLog", "TranscriptArchive",
           "handoff_span"]
