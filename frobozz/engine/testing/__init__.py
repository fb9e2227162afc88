"""Test doubles shipped with the engine: a fake CLI and a session store in memory; and, for tests' ease, the
scripted Messages API server (product code: it lives in `frobozz.engine.scripted`)."""

from ..scripted import ApiError, Handler, MessagesRequest, Reply, ScriptedModel, Text, Thinking, ToolUse, replies
from ._fake_cli import fake_cli_path
from ._session_store import InMemorySessionStore

__all__ = [
    "ApiError",
    "Handler",
    "InMemorySessionStore",
    "MessagesRequest",
    "Reply",
    "ScriptedModel",
    "Text",
    "Thinking",
    "ToolUse",
    "fake_cli_path",
    "replies",
]
