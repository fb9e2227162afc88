"""A loopback port that nothing listens on as it is picked: for a server a test starts there, or an address
whose connections are refused (a database or an API that is down)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
