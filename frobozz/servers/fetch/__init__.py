"""The `fetch` MCP server (`frobozz serve fetch`): the web, read safely."""

from ._server import create_server
from .settings import Settings

__all__ = ["Settings", "create_server"]
