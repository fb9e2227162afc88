"""Orchestrated dialogues: several claude agents work through files; the orchestrator owns the structure
(skeletons, validation, consensus, resume). A library part on the engine, with no MCP in it."""

from ._consensus import consensus_of
from ._directory import DIALOGUE, QUESTION, SUMMARY, SYNTHESIS
from ._entries import Entry
from ._events import (
    ConsensusReached,
    DialogueEvent,
    DialogueState,
    FileRestored,
    Report,
    Resumed,
    RoleStats,
    Step,
    StepFinished,
    StepStarted,
    ToolDenied,
    ToolUsed,
)
from ._inputs import read_question
from ._orchestrator import Dialogue
from ._roles import Role, load_roles, role_of
from ._scripted import ScriptedDialogue
from .exceptions import DialogueError, DialogueFileError, DialogueInputError, TurnError
from .settings import CONSENSUS_PHRASES, DialogueSettings

__all__ = [
    "CONSENSUS_PHRASES",
    "DIALOGUE",
    "QUESTION",
    "SUMMARY",
    "SYNTHESIS",
    "ConsensusReached",
    "Dialogue",
    "DialogueError",
    "DialogueEvent",
    "DialogueFileError",
    "DialogueInputError",
    "DialogueSettings",
    "DialogueState",
    "Entry",
    "FileRestored",
    "Report",
    "Resumed",
    "Role",
    "RoleStats",
    "ScriptedDialogue",
    "Step",
    "StepFinished",
    "StepStarted",
    "ToolDenied",
    "ToolUsed",
    "TurnError",
    "consensus_of",
    "load_roles",
    "read_question",
    "role_of",
]
