"""The agent behind an app: sessions in workspaces, messages answered in order, questions to the user, an
event relay that any number of clients follow, a tool log; kept in Postgres. Built on the engine; the
engine knows nothing of it. Its HTTP API is `frobozz.agent.create_app`."""

from ._agent import Agent
from ._events import AgentEvent, Done, Error, Logged, Question, Status, TextDelta, ToolResult, ToolUse
from ._http import create_app
from ._workspaces import Workspace, Workspaces
from .exceptions import AgentError, InputError, QuestionError, SessionNotFoundError, WorkspaceError
from .settings import AgentSettings

__all__ = [
    "Agent",
    "AgentError",
    "AgentEvent",
    "AgentSettings",
    "Done",
    "Error",
    "InputError",
    "Logged",
    "Question",
    "QuestionError",
    "SessionNotFoundError",
    "Status",
    "TextDelta",
    "ToolResult",
    "ToolUse",
    "Workspace",
    "WorkspaceError",
    "Workspaces",
    "create_app",
]
