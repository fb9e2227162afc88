"""Which servers exist and where their factories live (imported only when asked for)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._tracing import traced


@dataclass(frozen=True)
class ServerSpec:
    name: str
    module: str
    description: str
    memory: bool = False  # built on a MemoryService (cortex's database and embedding model), which it can share
    # A server that is not, but opens one on some settings (the game server's recall), says so with its settings'
    # `memory_settings()`: those of the MemoryService it would open, None when it opens none; it can share one too.
    session: bool = False  # takes the id of the claude session it serves (handoff signs its letters with it)

    def factory(self) -> tuple[Any, Any]:
        """The server's `create_server` and its settings class."""
        module = importlib.import_module(self.module)
        return module.create_server, module.Settings


SERVERS: dict[str, ServerSpec] = {
    s.name: s
    for s in (
        ServerSpec("game", "frobozz.servers.game", "play Z-machine games (Zork I and any story file)"),
        ServerSpec("cortex", "frobozz.servers.cortex", "long-term memory on Postgres + pgvector", memory=True),
        ServerSpec("fetch", "frobozz.servers.fetch", "read the web: pages, feeds, PDFs, JSON, images"),
        ServerSpec("forge", "frobozz.servers.forge", "make images on SD WebUI, ComfyUI or an OpenAI-compatible API"),
        ServerSpec(
            "handoff",
            "frobozz.servers.handoff",
            "pass work to the next context window (letters in cortex's Postgres)",
            memory=True,
            session=True,
        ),
    )
}


def load_server(
    name: str, *, service: Any = None, session: Callable[[], str | None] | None = None, **overrides: Any
) -> Any:
    """Build the named server from its settings (environment first, then `overrides`). In a process that
    serves several (in-process servers, the plugin's daemon): `service`, a MemoryService whose pool and
    embedding model the memory servers share (and the game server, when it recalls); `session`, the id of the
    claude session the server serves now (what claude tells a subprocess server in CLAUDE_CODE_SESSION_ID;
    handoff signs its letters with it)."""
    try:
        spec = SERVERS[name]
    except KeyError:
        raise KeyError(f"no server {name!r}; known: {', '.join(SERVERS)}") from None
    create_server, settings_cls = spec.factory()
    settings = settings_cls(**overrides)
    shared: dict[str, Any] = {}
    if service is not None and (memory := _memory_settings(spec, settings)) is not None:
        shared["service"] = service.sharing(memory)
    if spec.session and session is not None:
        shared["session"] = session
    return traced(create_server(settings, **shared))  # its calls under the engine's spans, when traced


def _memory_settings(spec: ServerSpec, settings: Any) -> Any:
    """The settings of the MemoryService the server works on, None if it works on none: a memory server's own
    settings; another's say it (the game server's, when it recalls after each act)."""
    if spec.memory:
        return settings
    wanted = getattr(settings, "memory_settings", None)
    return wanted() if callable(wanted) else None
