"""MCP client configurations for the servers: the `mcpServers` JSON claude (and other clients) read.

`mcp-config/*.json` are the ready files (they run `frobozz` from PATH); `config_for()` writes one with
absolute paths for this install, and `install_config()` merges servers into a project's `.mcp.json` the
way `claude mcp add --scope project` does."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .._files import atomic_write
from ._registry import SERVERS

BUNDLES: dict[str, tuple[str, ...]] = {
    "frobozz": ("cortex", "fetch", "forge", "handoff", "game"),
    "game": ("game",),
    "memory": ("cortex", "handoff"),
}
_PATHS = ("FROBOZZ_DATA_DIR", "FROBOZZ_GAMES_DIR")  # settings that are paths; secrets are never written out


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
