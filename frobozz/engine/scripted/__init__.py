"""A scripted Anthropic Messages API server on 127.0.0.1 that the real claude CLI runs against offline:
the walkthrough player, `--model scripted` and offline demos run on it (and the tests do)."""

from ._messages_api import ApiError, Handler, MessagesRequest, Reply, ScriptedModel, Text, Thinking, ToolUse, replies

__all__ = ["ApiError", "Handler", "MessagesRequest", "Reply", "ScriptedModel", "Text", "Thinking", "ToolUse", "replies"]
