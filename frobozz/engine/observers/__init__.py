"""Things that watch a session's output stream."""

from ._archive import TranscriptArchive
from ._broadcast import Broadcast
from ._handoff import HandoffLetter, HandoffRelay, HandoffStep, ask_to_hand_off, handoff_span
from ._tool_log import ToolCall, ToolLog

__all__ = [
    "Broadcast",
    "HandoffLetter",
    "HandoffRelay",
    "HandoffStep",
    "ToolCall",
    "ToolLog",
    "TranscriptArchive",
    "ask_to_hand_off",
    "handoff_span",
]
