"""Test doubles shipped with the engine: a scripted Messages API server for the real CLI, a fake CLI,
and a session store in memory."""

from ._fake_cli import fake_cli_path
from ._messages_api import ApiError, Handler, MessagesRequest, Reply, ScriptedModel, Text, Thinking, ToolUse, replies
from ._session_store import InMemorySessionStore

__all__ = ["ApiError", "Handler", "InMemorySessionStore", "MessagesRequest", "Reply", "ScriptedModel", "Text",
           "Thinking", "ToolUse", "fake_cli_path", "replies"]
