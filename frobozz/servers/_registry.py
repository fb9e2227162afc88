"""Which servers exist and where their factories live (imported only when asked for)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ._tracing import traced


@dataclass(frozen=True)
class ServerSpec:
    name: str
    module: str
    description: str

    def factory(self) -> tuple[Any, Any]:
        """The server's `create_server` and its settings class."""
        module = importlib.import_module(self.module)
        return module.create_server, module.Settings


SERVERS: dict[str, ServerSpec] = {
    s.name: s
    for s in (
        ServerSpec("game", "frobozz.servers.game", "play Z-machine games (Zork I and any story file)"),
        ServerSpec("cortex", "frobozz.servers.cortex", "long-term memory on Postgres + pgvector"),
        ServerSpec("fetch", "frobozz.servers.fetch", "read the web: pages, feeds, PDFs, JSON, images"),
        ServerSpec("forge", "frobozz.servers.forge", "make images on SD WebUI, ComfyUI or an OpenAI-compatible API"),
        ServerSpec(
            "handoff", "frobozz.servers.handoff", "pass work to the next context window (letters in cortex's Postgres)"
        ),
    )
}


def load_server(name: str, **overrides: Any) -> Any:
    """Build the named server from its settings (environment first, then `overrides`)."""
    try:
        spec = SERVERS[name]
    except KeyError:
        raise KeyError(f"no server {name!r}; known: {', '.join(SERVERS)}") from None
    create_server, settings_cls = spec.factory()
    return traced(create_server(settings_cls(**overrides)))  # its calls under the engine's spans, when traced
