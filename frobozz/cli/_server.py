"""The HTTP server of `frobozz serve all --http`, `serve agent` and `web`: uvicorn's, run as `uvicorn.run` runs
it, but stopped when the app's lifespan ends on an error while it serves. A part's own task that fails (the
agent's lease keeper, the plugin's sidecar, an MCP server's session manager) ends the lifespan, and uvicorn
alone would go on taking requests for parts that are gone. The process exits with status 1 instead, and a
line that says what failed, for a supervisor to start it again."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from ._output import err

if TYPE_CHECKING:  # (starlette is imported by the server's own parts, not by every command's start)
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

FAILED = "a part of the server failed while it served (the log above says how)"


class Server:
    def __init__(self) -> None:
        self.failure: str | None = None
        self._uvicorn: Any = None

    def stop_on(self, failure: str) -> None:
        """Stop serving, and exit with status 1 saying `failure` (the first said is the one kept)."""
        if self.failure is None:
            self.failure = failure
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True

    def run(self, app: ASGIApp, host: str, port: int, *, bound: Callable[[], None] = lambda: None) -> None:
        """Serve `app`; `bound` is called once the port is this server's (what it prints, the address and a
        sign-in link, is then true: a port already in use is one error line and status 3, nothing before it)."""
        import uvicorn

        config = uvicorn.Config(self._watched(app), host=host, port=port, log_level="warning")
        self._uvicorn = uvicorn.Server(config)
        sock = _bind(host, port)
        bound()
        try:
            self._uvicorn.run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        if self.failure is not None:
            err.print(f"[red]frobozz:[/] {escape(self.failure)}")
            raise typer.Exit(1)
        if not self._uvicorn.started:
            raise typer.Exit(3)  # (uvicorn.run's status when the app does not start)

    def _watched(self, app: ASGIApp) -> ASGIApp:
        """`app`, its lifespan watched: one that ends before uvicorn asked it to or was stopping (ASGI's
        `lifespan.shutdown.failed`, or `.complete`, unasked) stops the server."""

        async def watched(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "lifespan":
                await app(scope, receive, send)
                return
            asked = False

            async def receiving() -> Message:
                nonlocal asked
                message = await receive()
                asked = asked or message["type"] == "lifespan.shutdown"
                return message

            async def sending(message: Message) -> None:
                ended = message["type"].startswith("lifespan.shutdown.")  # (.failed, or .complete: an error swallowed)
                if ended and not asked and not self._uvicorn.should_exit:  # (a forced quit asks no shutdown)
                    self.stop_on(FAILED)
                await send(message)

            await app(scope, receiving, sending)

        return watched


def _bind(host: str, port: int) -> socket.socket:
    """The port, this process's (as uvicorn binds it); taken or not allowed: one line saying so, status 3."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        err.print(f"[red]frobozz:[/] cannot listen on {escape(host)}:{port}: {escape(e.strerror or str(e)).lower()}")
        raise typer.Exit(3) from e
    return sock
