"""The plugin's MCP servers (cortex, handoff) served inside the memory daemon, one per claude that connects:
claude starts the plugin's relay (the hook script in `mcp` mode, standard library only) instead of a
Python process with the servers' imports in it, and the relay joins claude's stdio to the daemon's socket.
So a `claude -p` no longer waits for two heavy processes to start: the servers are already warm, on the
daemon's pool and embedding model, with claude's project as their default namespace and claude's session
as the one what cortex stores is marked seen in."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.stdio import stdio_server

from ..memory import MemoryService

log = logging.getLogger("frobozz.plugin")

# server name -> (the settings to change, the daemon's service) -> an MCPServer; given by the CLI, which may
# import the servers (the plugin part may not)
ServerFactory = Callable[[dict[str, Any], MemoryService], Any]
ServerFactories = Mapping[str, ServerFactory]
MAX_LINE = 16 * 1024 * 1024


class _Lines:
    """A socket as the stdin and stdout `stdio_server` reads and writes (lines of JSON-RPC)."""

    def __init__(self, buffered: BufferedByteReceiveStream, stream: SocketStream) -> None:
        self.buffered, self.stream = buffered, stream

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            try:
                line = await self.buffered.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            yield line.decode("utf-8", errors="replace") + "\n"

    async def write(self, text: str) -> None:
        try:
            await self.stream.send(text.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # claude (the relay) has gone: the reading side ends the session

    async def flush(self) -> None:
        pass


async def serve_on(server: Any, buffered: BufferedByteReceiveStream, stream: SocketStream) -> None:
    """Serve one MCP session on the relay's connection until claude (the relay) closes it."""
    lines = _Lines(buffered, stream)
    try:
        async with stdio_server(lines, lines) as (read, write):  # type: ignore[arg-type]  # _Lines: the file methods it uses
            # what MCPServer.run_stdio_async does, on these streams: its own lifespan, closed at the end
            lowlevel = server._lowlevel_server
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    except Exception as e:  # noqa: BLE001 - one claude's session failing never takes the daemon down
        log.warning("plugin: an MCP session ended with %s", type(e).__name__)
