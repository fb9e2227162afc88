"""The engine's errors: one root with the fields a caller needs (exit code, stderr tail)."""

from __future__ import annotations


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""

    def __init__(self, message: str, *, exit_code: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class CLINotFoundError(EngineError):
    """No `claude` executable where the options or PATH say."""


class ProcessError(EngineError):
    """The claude process could not be started, or died and could not be brought back."""


class ControlError(EngineError):
    """The CLI answered a control request with an error."""


class ControlTimeoutError(ControlError):
    """The CLI did not answer a control request in time."""


class McpServerError(EngineError):
    """An MCP server from the config failed to start, or was still starting when the wait ran out."""


class SessionClosedError(EngineError):
    """The engine or session was closed; start a new one."""


class TranscriptNotFoundError(EngineError):
    """The session to resume has no transcript on this machine or in the session store (its claude never
    wrote one there: it was cut off in its first turn before the store had any of it)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no transcript for session {session_id} here or in the session store")
        self.session_id = session_id
