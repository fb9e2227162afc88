"""The `game` MCP server (`frobozz serve game`)."""

from ._server import create_server
from .settings import Settings

__all__ = ["Settings", "create_server"]
