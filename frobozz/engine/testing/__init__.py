"""Test doubles shipped with the engine: a scripted Messages API server for the real CLI, a fake CLI,
and a session store in memory."""

from ._fake_cli import fake_cli_path
from ._messages_api import ApiError, MessagesRequest, Reply, ScriptedModel, Text, Thinking, ToolUse, replies
from ._session_store import InMemorySessionStore

__all__ = ["fake_cli_path", "ApiError", "InMemorySessionStore", "MessagesRequest", "Reply", "ScriptedModel", "Text",
           "Thinking", "ToolUse", "replies"]
