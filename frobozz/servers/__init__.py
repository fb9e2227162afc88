"""The MCP servers. Each sub-package has a `create_server(settings)` factory and a settings model."""

from ._registry import SERVERS, ServerSpec, load_server

__all__ = ["SERVERS", "ServerSpec", "load_server"]
