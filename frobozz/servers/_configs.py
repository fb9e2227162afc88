"""MCP client configurations for the servers: the `mcpServers` JSON claude (and other clients) read.

`mcp-config/*.json` are the ready files (they run `frobozz` from PATH); `config_for()` writes one with
absolute paths for this install, `hub_config()` one that reaches a hub's servers over HTTP (`serve all --http`),
and `install_config()` merges servers into a project's `.mcp.json` the way `claude mcp add --scope project` does."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._files import atomic_write
from ._registry import SERVERS

BUNDLES: dict[str, tuple[str, ...]] = {
    "frobozz": ("cortex", "fetch", "forge", "handoff", "game"),
    "game": ("game",),
    "memory": ("cortex", "handoff"),
}
MIN_TOKEN_CHARS = 16  # the hub's one bearer token, at least (a generated one has 43)
_PATHS = ("FROBOZZ_DATA_DIR", "FROBOZZ_GAMES_DIR")  # settings that are paths; secrets are never written out
# claude expands `${VAR}` (and `${VAR:-default}`) in an HTTP server's headers from its own environment, when it starts
HUB_TOKEN = "${FROBOZZ_HUB_TOKEN}"
# The header that says which claude session a request comes from (over stdio claude says it in the server's
# CLAUDE_CODE_SESSION_ID; over HTTP it sends nothing that does, and does not set that variable for itself): set
# FROBOZZ_SESSION_ID to the id claude is started with (`claude --session-id ID`, or the one resumed).
SESSION_HEADER = "X-Frobozz-Session-Id"
SESSION_ID = "${FROBOZZ_SESSION_ID:-}"
# The header that gives a memory server (cortex, handoff) over HTTP its default namespace for the request: the one
# a tool called without a `namespace` works in (over stdio, FROBOZZ_CORTEX_DEFAULT_NAMESPACE in the server's env).
NAMESPACE_HEADER = "X-Frobozz-Namespace"


class ConfigError(ValueError):
    pass


def check_names(names: list[str]) -> list[str]:
    """The server names given, each known and once, in order (ConfigError for an unknown one or none)."""
    unknown = [n for n in names if n not in SERVERS]
    if unknown or not names:
        raise ConfigError(f"unknown server {', '.join(unknown) or '(none given)'}; known: {', '.join(SERVERS)}")
    return list(dict.fromkeys(names))


def portable(names: list[str]) -> dict[str, Any]:
    """The config as shipped in mcp-config/: `frobozz` from PATH, settings from the environment."""
    return {
        "mcpServers": {n: {"type": "stdio", "command": "frobozz", "args": ["serve", n]} for n in check_names(names)}
    }


def config_for(names: list[str], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """This install's config: this Python's absolute path, and the path settings now in effect."""
    environ = dict(os.environ if environ is None else environ)
    env = {k: str(Path(environ[k]).resolve()) for k in _PATHS if environ.get(k)}
    return {
        "mcpServers": {
            n: {"type": "stdio", "command": sys.executable, "args": ["-m", "frobozz", "serve", n], "env": env}
            for n in check_names(names)
        }
    }


def hub_config(names: list[str], url: str, token: str | None = None, *, namespace: str | None = None) -> dict[str, Any]:
    """A config that reaches the servers of the hub at `url` (`frobozz serve all --http`: each at `URL/NAME/mcp`),
    with its bearer token: `token`, or `${FROBOZZ_HUB_TOKEN}`, which claude reads from its environment as it
    starts. A server that signs with claude's session (handoff) is also sent `${FROBOZZ_SESSION_ID}`; with
    `namespace`, the memory servers (cortex, handoff) are sent it as their default namespace (else they use the
    hub's own)."""
    base = hub_url(url)
    if token is not None and (len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token)):
        raise ConfigError("the hub's token is the one it printed (16 characters at least, no spaces)")
    if namespace is not None:
        from ..memory import MemoryStoreError, check_namespace  # here: a config without one imports no memory

        try:
            check_namespace(namespace)
        except MemoryStoreError as e:
            raise ConfigError(str(e)) from None
    auth = {"Authorization": f"Bearer {token if token is not None else HUB_TOKEN}"}
    return {
        "mcpServers": {
            n: {
                "type": "http",
                "url": f"{base}/{n}/mcp",
                "headers": {
                    **auth,
                    **({SESSION_HEADER: SESSION_ID} if SERVERS[n].session else {}),
                    **({NAMESPACE_HEADER: namespace} if namespace is not None and SERVERS[n].memory else {}),
                },
            }
            for n in check_names(names)
        }
    }


def hub_url(url: str) -> str:
    """The hub's address as given (`http://HOST:PORT`, or a path it is served under), without a trailing slash;
    ConfigError for what is not one."""
    hint = "give the hub's address as serve all --http prints it, such as http://127.0.0.1:8765"
    url = url.strip()
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ConfigError(f"{url!r} has spaces or control characters: {hint}")
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise ConfigError(f"{url!r} is not an address ({e}): {hint}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{url!r} is not an http:// or https:// address: {hint}")
    try:
        port = parts.port  # (one that is not a number, or out of range, raises here)
    except ValueError:
        port = 0
    if port == 0:  # (taken, a config then failed at every connection)
        raise ConfigError(f"{url!r} is not an address: its port is not a number from 1 to 65535: {hint}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(
            f"{url!r} has a query, fragment or password, which the hub does not take (its token goes in "
            f"FROBOZZ_HUB_TOKEN, not in the address): {hint}"
        )
    if parts.path.rstrip("/").endswith("/mcp"):
        raise ConfigError(f"{url!r} is one server's endpoint; the config names each server's: {hint}")
    return parts.geturl().rstrip("/")


def write_config(config: dict[str, Any], path: Path) -> None:
    """An MCP config written atomically, so claude never reads half of one. A file already there that is not an
    MCP config is an error and is left as it was (`-o /etc/passwd`, run as root, replaced it); a device or a
    pipe (`/dev/stdout`) is written as it is, not replaced."""
    text = json.dumps(config, indent=2) + "\n"
    if path.is_dir():
        raise ConfigError(f"{path} is a folder: give the path of a file to write")
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8") as out:
            out.write(text)
        return
    if path.exists():
        try:
            current = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            current = None
        if not isinstance(current, dict) or "mcpServers" not in current:
            raise ConfigError(f"{path} is there and is not an MCP config: move it, or write to another file")
    atomic_write(path, text.encode())


def install_config(config: dict[str, Any], project: Path) -> tuple[Path, list[str]]:
    """Merge the servers into `project/.mcp.json`, keeping every other server there; a file that is
    not an MCP config is an error and is left as it was."""
    path = project / ".mcp.json"
    current: dict[str, Any] = {"mcpServers": {}}
    if path.exists():
        try:
            current = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ConfigError(f"{path} is not valid JSON ({e}); fix or move it, then install again") from e
        if not isinstance(current, dict) or not isinstance(current.setdefault("mcpServers", {}), dict):
            raise ConfigError(f"{path} has no mcpServers object; fix or move it, then install again")
    current["mcpServers"].update(config["mcpServers"])
    write_config(current, path)
    return path, list(config["mcpServers"])
