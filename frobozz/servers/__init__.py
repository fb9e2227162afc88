"""The MCP servers. Each sub-package has a `create_server(settings)` factory and a settings model; the hub
serves them all over HTTP behind tokens; `_configs` writes the MCP configs that launch them."""

from ._auth import BearerToken, ScopedTokens
from ._configs import BUNDLES, ConfigError, check_names, config_for, install_config, portable, write_config
from ._grants import Grant, hashed, load_grants
from ._http import hub_app, new_token
from ._registry import SERVERS, ServerSpec, load_server

__all__ = ["BUNDLES", "SERVERS", "BearerToken", "ConfigError", "Grant", "ScopedTokens", "ServerSpec", "check_names",
           "config_for", "hashed", "hub_app", "install_config", "load_grants", "load_server", "new_token", "portable",
           "write_config"]
