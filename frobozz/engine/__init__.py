"""The claude CLI as a duplex session: producers → queue → engine (claude) → router → observers.

A general SDK for the claude CLI over stream-json; it imports nothing else of Frobozz.
"""

from ._control import Allow, Deny, PermissionCallback, PermissionContext
from ._cost import TurnCost
from ._engine import Engine, EngineState
from ._events import (
    ApiRetry,
    AssistantMessage,
    Block,
    CompactBoundary,
    ContextUsage,
    ErrorEvent,
    Event,
    McpServerStatus,
    MirrorError,
    ProcessExit,
    RateLimit,
    Restarted,
    Result,
    StreamEvent,
    SystemInit,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownEvent,
    Usage,
    UserMessage,
    parse_blocks,
    parse_event,
    text_of,
)
from ._hooks import Hook, HookEvent, HookInput, HookMatcher, HookOutput, Hooks
from ._options import MODEL_NAME, EngineOptions, Thinking, find_claude, model_name_problem
from ._pool import EnginePool, Sidecar
from ._proxy import is_compaction_request
from ._router import Observer, Router
from ._session import Producer, Session, SessionState
from ._session_store import SessionKey, SessionStore, copy_sign_in
from ._spare import WarmSpare, launch_key, started
from ._transcripts import SessionInfo, config_dir, list_sessions, project_key, transcript_path
from ._versions import TESTED as TESTED_CLI_VERSIONS
from ._versions import CLIReport, inspect_cli
from .exceptions import (
    CLINotFoundError,
    ControlError,
    ControlTimeoutError,
    EngineError,
    McpServerError,
    ProcessError,
    SessionClosedError,
    TranscriptNotFoundError,
)
from .settings import EngineSettings

__all__ = [
    "MODEL_NAME",
    "TESTED_CLI_VERSIONS",
    "Allow",
    "ApiRetry",
    "AssistantMessage",
    "Block",
    "CLINotFoundError",
    "CLIReport",
    "CompactBoundary",
    "ContextUsage",
    "ControlError",
    "ControlTimeoutError",
    "Deny",
    "Engine",
    "EngineError",
    "EngineOptions",
    "EnginePool",
    "EngineSettings",
    "EngineState",
    "ErrorEvent",
    "Event",
    "Hook",
    "HookEvent",
    "HookInput",
    "HookMatcher",
    "HookOutput",
    "Hooks",
    "McpServerError",
    "McpServerStatus",
    "MirrorError",
    "Observer",
    "PermissionCallback",
    "PermissionContext",
    "ProcessError",
    "ProcessExit",
    "Producer",
    "RateLimit",
    "Restarted",
    "Result",
    "Router",
    "Session",
    "SessionClosedError",
    "SessionInfo",
    "SessionKey",
    "SessionState",
    "SessionStore",
    "Sidecar",
    "StreamEvent",
    "SystemInit",
    "SystemMessage",
    "TextBlock",
    "Thinking",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "TranscriptNotFoundError",
    "TurnCost",
    "UnknownEvent",
    "Usage",
    "UserMessage",
    "WarmSpare",
    "config_dir",
    "copy_sign_in",
    "find_claude",
    "inspect_cli",
    "is_compaction_request",
    "launch_key",
    "list_sessions",
    "model_name_problem",
    "parse_blocks",
    "parse_event",
    "project_key",
    "started",
    "text_of",
    "transcript_path",
]
