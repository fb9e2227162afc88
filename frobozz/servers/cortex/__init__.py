"""The `cortex` MCP server (`frobozz serve cortex`): long-term memory on Postgres + pgvector."""

from ._server import create_server
from .settings import Settings

__all__ = ["Settings", "create_server"]
