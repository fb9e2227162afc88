"""The MCP servers. Each sub-package has a `create_server(settings)` factory and a settings model; the hub
serves them all over HTTP behind tokens; `_configs` writes the MCP configs that launch them."""

import importlib
from typing import Any

from ._configs import (
    BUNDLES,
    MIN_TOKEN_CHARS,
    ConfigError,
    check_names,
    config_for,
    hub_config,
    install_config,
    portable,
    write_config,
)
from ._registry import SERVERS, ServerSpec, load_server

# The hub's parts import mcp and starlette (half a second): loaded when first asked for, so that every CLI
# command, which imports this package for its configs, stays quick.
_LAZY = {
    "BearerToken": "_auth",
    "ScopedTokens": "_auth",
    "Grant": "_grants",
    "hashed": "_grants",
    "load_grants": "_grants",
    "hub_app": "_http",
    "new_token": "_http",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUNDLES",
    "MIN_TOKEN_CHARS",
    "SERVERS",
    "BearerToken",
    "ConfigError",
    "Grant",
    "ScopedTokens",
    "ServerSpec",
    "check_names",
    "config_for",
    "hashed",
    "hub_app",
    "hub_config",
    "install_config",
    "load_grants",
    "load_server",
    "new_token",
    "portable",
    "write_config",
]
