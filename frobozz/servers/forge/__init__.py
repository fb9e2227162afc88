"""The `forge` MCP server (`frobozz serve forge`): images from SD WebUI, ComfyUI or an OpenAI-compatible API."""

from ._server import create_server
from .settings import Settings

__all__ = ["Settings", "create_server"]
