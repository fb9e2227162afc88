"""cortex under many clients: 1, 8 and 32 MCP clients over streamable HTTP, each storing and searching in
turn for a while, against a real hub process (`frobozz serve cortex --http`) on a scratch embedded
Postgres; the same load twice in one run: concurrent embeddings batched (the default) and one at a time
(FROBOZZ_EMBEDDING_BATCH_MS=0). Printed: operations per second, p50 and p99 latency, and the ratio.

Run: .venv/bin/python bench/cortex_load.py [--seconds 20] [--clients 1,8,32]
Target (issue 36): >= 150 store+search operations per second at 32 clients, p99 under 400 ms
(one at a time served about 90 on two cores). The clients run in this process, on the same cores.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from frobozz._children import dying_with_parent

TARGET_OPS, TARGET_P99_MS = 150, 400
WORDS = (
    "lantern troll garlic river sword bottle leaflet mailbox window attic cellar maze thief egg canary "
    "painting torch coffin dam reservoir"
).split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_ready(url: str, token: str, server: subprocess.Popen[bytes]) -> None:
    with anyio.fail_after(180):
        while True:
            if server.poll() is not None:
                sys.exit(f"the hub exited with {server.returncode}")
            try:
                async with client(url, token) as c:
                    await c.call_tool("recent", {"limit": 1, "namespace": "load"})
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                await anyio.sleep(0.5)


def client(url: str, token: str) -> Client:
    return Client(
        streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        )
    )


async def load(url: str, token: str, clients: int, seconds: float, tag: str) -> tuple[float, list[float], int]:
    """(operations per second, latencies in ms, errors) of `clients` clients alternating store and search."""
    latencies: list[float] = []
    errors = 0
    ready = anyio.Event()
    connected = 0

    async def one(n: int) -> None:
        nonlocal errors, connected
        async with client(url, token) as c:
            connected += 1
            if connected == clients:
                ready.set()
            await ready.wait()
            end, i = time.perf_counter() + seconds, 0
            while time.perf_counter() < end:
                w = [WORDS[(n * 7 + i * 3 + k) % len(WORDS)] for k in range(4)]
                if i % 2 == 0:
                    name, args = (
                        "store",
                        {
                            "content": f"{tag} client {n} note {i}: the {w[0]} is near the {w[1]} and the {w[2]}.",
                            "namespace": "load",
                        },
                    )
                else:
                    name, args = "search", {"query": f"where is the {w[0]} {w[3]}", "namespace": "load", "limit": 5}
                t = time.perf_counter()
                result = await c.call_tool(name, args)
                latencies.append(1000 * (time.perf_counter() - t))
                errors += bool(result.is_error)
                i += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(clients):
            tg.start_soon(one, n)
    elapsed = time.perf_counter() - started
    return len(latencies) / min(elapsed, seconds), latencies, errors


async def main(seconds: float, levels: list[int]) -> None:
    import pgserver

    root = Path(tempfile.mkdtemp(prefix="frobozz-cortex-load-"))
    pg = pgserver.get_server(root / "pg", cleanup_mode="delete")
    results: dict[tuple[str, int], tuple[float, float, float, int]] = {}
    try:
        for label, batch_ms in (("batched", None), ("one at a time", "0")):
            token, port = secrets.token_urlsafe(16), free_port()
            env = {
                **os.environ,
                "FROBOZZ_DATA_DIR": str(root / "data"),
                "FROBOZZ_DATABASE_URL": pg.get_uri(),
                "FROBOZZ_HUB_TOKEN": token,
                "FROBOZZ_CORTEX_POOL_SIZE": "20",
            }
            if batch_ms is not None:
                env["FROBOZZ_EMBEDDING_BATCH_MS"] = batch_ms
            server = subprocess.Popen(
                dying_with_parent([sys.executable, "-m", "frobozz", "serve", "cortex", "--http", "--port", str(port)]),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                url = f"http://127.0.0.1:{port}/cortex/mcp"
                await wait_ready(url, token, server)
                await load(url, token, 4, 2, f"warm {label}")  # the model loaded, the pool filled
                for clients in levels:
                    ops, latencies, errors = await load(url, token, clients, seconds, label)
                    q = statistics.quantiles(latencies, n=100)
                    results[(label, clients)] = (ops, q[49], q[98], errors)
                    print(
                        f"{label:14} {clients:3} clients: {ops:6.1f} ops/s, p50 {q[49]:6.1f} ms, "
                        f"p99 {q[98]:7.1f} ms, {errors} errors ({len(latencies)} calls)",
                        flush=True,
                    )
            finally:
                server.terminate()
                server.wait(timeout=30)
    finally:
        pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    print("batched against one at a time, in this run:")
    for clients in levels:
        b, o = results[("batched", clients)], results[("one at a time", clients)]
        print(
            f"  {clients:3} clients: {b[0] / o[0]:.2f}x the operations per second, p99 {b[2]:.0f} ms against "
            f"{o[2]:.0f} ms"
        )
    top = results[("batched", max(levels))]
    print(
        f"target at {max(levels)} clients: >= {TARGET_OPS} ops/s ({top[0]:.0f}: {top[0] / TARGET_OPS:.2f}x), "
        f"p99 < {TARGET_P99_MS} ms ({top[2]:.0f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", default="1,8,32")
    arguments = parser.parse_args()
    anyio.run(main, arguments.seconds, [int(n) for n in arguments.clients.split(",")])
