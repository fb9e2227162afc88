"""A database that hangs, for a test: a TCP stand-in in front of the tests' Postgres that, once told to `hang()`,
still accepts connections and takes what is sent, but passes nothing on either way (as a Postgres whose
processes are all stopped, or a network that drops everything, does), until told to `answer()` again; what
was held then goes on, in order. Not a refused connection: nothing here ever says no."""

from __future__ import annotations

import socket
import threading
from urllib.parse import parse_qs, urlsplit


class BlackHole:
    """`with BlackHole(url) as hole:` then `hole.url` instead of `url`; `hole.hang()`, `hole.answer()`."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        host = parse_qs(parts.query).get("host", [parts.hostname or ""])[0]
        port = parts.port or 5432
        self._target: tuple[int, str | tuple[str, int]] = (
            (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}") if host.startswith("/") else (socket.AF_INET, (host, port))
        )
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.url = (
            f"postgresql://{parts.username or 'postgres'}:@127.0.0.1:{self._listener.getsockname()[1]}{parts.path}"
        )
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> BlackHole:
        threading.Thread(target=self._accept, name="black-hole", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._listener.close()
        self._flowing.set()  # the held threads go on, onto sockets closed under them
        with self._lock:
            for s in self._sockets:
                s.close()

    def hang(self) -> None:
        self._flowing.clear()

    def answer(self) -> None:
        self._flowing.set()

    def _keep(self, s: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(s)
        return s

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(self._keep(client),), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._flowing.wait()  # accepted (the kernel's backlog does that for a stopped server), then nothing
        if self._closed:
            return
        family, address = self._target
        upstream = self._keep(socket.socket(family, socket.SOCK_STREAM))
        try:
            upstream.connect(address)
        except OSError:
            client.close()
            return
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()  # taken, and held while the database hangs
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
