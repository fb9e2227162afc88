"""An ASGI app served on 127.0.0.1 from a thread: for the servers' test doubles and the tests' sites.
A leaf module: it imports nothing of Frobozz."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Literal

import uvicorn


def listener() -> socket.socket:
    """A socket bound to a free port on 127.0.0.1 for a server to listen on. It names IPPROTO_TCP: asyncio
    sets TCP_NODELAY only on sockets that do, and without it each small streamed chunk (an SSE event, a
    token) waits out Nagle against the peer's delayed ACK, about 40 ms."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class LoopbackServer:
    """`with LoopbackServer(app) as server: server.url` — started on a free port, stopped on exit."""

    def __init__(
        self, app: Any, *, lifespan: Literal["auto", "on", "off"] = "off", graceful: int | None = None
    ) -> None:
        """`graceful`: at stop, let open requests finish for up to that many seconds, then run the app's lifespan
        shutdown to its end (None: stop at once, and an app's lifespan is cancelled, not shut down)."""
        self.app = app
        self.lifespan = lifespan
        self.graceful = graceful
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        sock = listener()
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                log_level="warning",
                lifespan=self.lifespan,
                access_log=False,
                timeout_graceful_shutdown=self.graceful,
            )
        )
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._server.force_exit = self.graceful is None  # do not wait for slow requests
            self._thread.join(timeout=10 if self.graceful is None else self.graceful + 60)
            self._server = None

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
