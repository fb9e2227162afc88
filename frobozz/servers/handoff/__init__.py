"""The `handoff` MCP server (`frobozz serve handoff`): letters from one context window to the next."""

from ._server import create_server
from .settings import Settings

__all__ = ["Settings", "create_server"]
