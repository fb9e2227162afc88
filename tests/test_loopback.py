"""The servers' listening socket: a connection accepted on it streams without Nagle's delay."""

import asyncio
import socket

import anyio
import pytest

from frobozz._loopback import listener

pytestmark = pytest.mark.anyio


async def test_a_connection_asyncio_accepts_on_the_listener_has_tcp_nodelay():
    sock = listener()
    accepted: list[int] = []
    done = asyncio.Event()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()
            done.set()

    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        client = await anyio.connect_tcp("127.0.0.1", sock.getsockname()[1])
        with anyio.fail_after(10):
            await done.wait()
        await client.aclose()
    finally:
        server.close()
    assert accepted == [1]  # (a plain socket.socket() listener gives 0 here: asyncio skips proto 0)
