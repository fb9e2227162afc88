"""Test doubles shipped with the engine: a scripted Messages API server for the real CLI, and a fake CLI."""

from ._fake_cli import fake_cli_path
from ._messages_api import ApiError, MessagesRequest, Reply, ScriptedModel, Text, Thinking, ToolUse, replies

__all__ = ["fake_cli_path", "ApiError", "MessagesRequest", "Reply", "ScriptedModel", "Text", "Thinking", "ToolUse",
           "replies"]
