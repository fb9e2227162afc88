"""A real HTTP server on 127.0.0.1 that answers with headers and then a byte at a time, never ending its body:
the feed that holds a reader for ever unless it has a deadline of its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Trickle:
    url: str
    started: int = 0  # requests begun
    ended: int = 0  # requests whose reader went away
    stop: threading.Event = field(default_factory=threading.Event)


@contextmanager
def trickling(every: float = 0.2) -> Iterator[Trickle]:
    """A server whose every answer is a byte each `every` seconds, until its client goes away."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            trickle.started += 1
            try:
                self.send_response(200)
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                self.wfile.write(b"<rss version='2.0'><channel>")
                while not trickle.stop.wait(every):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:
                pass
            finally:
                trickle.ended += 1

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    trickle = Trickle(f"http://127.0.0.1:{server.server_address[1]}/feed")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield trickle
    finally:
        trickle.stop.set()
        server.shutdown()
        server.server_close()
