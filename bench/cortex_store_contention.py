"""Stores into one namespace from many connections at once, Postgres alone (no embedding model, no MCP): what
issue 36's store tail comes from, apart from the CPU the model and the clients take on the same two cores.

Three ways of storing, each on a scratch database of its own on one embedded Postgres, taken in turn (so a busy
machine weighs on each alike), each `--rounds` times:
- `008`: migration 008's `cortex_store` (the memory, its words counted into the namespace's row and each word's
  row, its neighbours' words in context refreshed: one statement), as issue 36's baseline stored;
- `009 one`: the same statement after migration 009 (words counted as insert-only deltas; the refresh takes a
  per-namespace lock of its own);
- `009 two`: what `MemoryStore.store` does after 009: `cortex_insert` (committed to disk), then `cortex_settle`
  (the refresh, under the lock, not waited on to disk).
Printed: stores per second, p50 and p99 of a store, and each against `008`, in one run.

Run: .venv/bin/python bench/cortex_store_contention.py [--clients 32] [--seconds 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import random
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import asyncpg
from _ending import end_with_the_bench, scratch_postgres
from pgvector.asyncpg import register_vector

from frobozz.memory._database import _migrations

WORDS = (
    "lantern troll garlic river sword bottle leaflet mailbox window attic cellar maze thief egg canary "
    "painting torch coffin dam reservoir kitchen forest clearing grating gallery studio chimney"
).split()
DIM = 384
WAYS = {
    "008": (8, ["SELECT id FROM cortex_store('load', $1, md5($1), '{}'::jsonb, NULL, $2)"]),
    "009 one": (9, ["SELECT id FROM cortex_store('load', $1, md5($1), '{}'::jsonb, NULL, $2)"]),
    "009 two": (
        9,
        [
            "SELECT id FROM cortex_insert('load', $1, md5($1), '{}'::jsonb, NULL, $2)",
            "SELECT cortex_settle('load', ARRAY[$1::bigint])",
        ],
    ),
}


async def database(server_uri: str, last: int) -> str:
    """A scratch database with cortex's migrations up to `last`."""
    name = f"b_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(server_uri)
    try:
        await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    base, _, query = server_uri.partition("?")
    url = f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
    c = await asyncpg.connect(url)
    try:
        await c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for version, _, sql in _migrations("frobozz.memory"):
            if version <= last:
                await c.execute(sql.replace("{dim}", str(DIM)).replace("{model}", "bench"))
    finally:
        await c.close()
    return url


def sentence(rng: random.Random) -> str:
    return f"Note {rng.getrandbits(48):x}: the {' and the '.join(rng.sample(WORDS, 4))}."


def vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


async def run(url: str, statements: list[str], clients: int, seconds: float) -> tuple[float, list[float]]:
    latencies: list[float] = []
    pool = await asyncpg.create_pool(url, min_size=clients, max_size=clients, init=register_vector)
    try:

        async def client(n: int, until: float) -> None:
            rng = random.Random(n)
            while time.perf_counter() < until:
                text, v = sentence(rng), vector(rng)
                async with pool.acquire() as c:
                    start = time.perf_counter()
                    row = await c.fetchrow(statements[0], text, v)
                    if len(statements) > 1 and row is not None:
                        await c.execute(statements[1], row["id"])
                    latencies.append((time.perf_counter() - start) * 1000)

        for n in range(clients):  # warm: the connections made, the functions planned
            async with pool.acquire() as c:
                rng = random.Random(-n - 1)
                row = await c.fetchrow(statements[0], sentence(rng), vector(rng))
                if len(statements) > 1 and row is not None:
                    await c.execute(statements[1], row["id"])
        begin = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(clients):
                tg.start_soon(client, n, begin + seconds)
        return len(latencies) / (time.perf_counter() - begin), latencies
    finally:
        await pool.close()


async def main(clients: int, seconds: float, rounds: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="frobozz-store-contention-"))
    pg = scratch_postgres(root)
    results: dict[str, list[tuple[float, float, float]]] = {way: [] for way in WAYS}
    try:
        for r in range(rounds):
            for way, (last, statements) in WAYS.items():
                url = await database(pg.get_uri(), last)
                ops, latencies = await run(url, statements, clients, seconds)
                q = statistics.quantiles(latencies, n=100)
                results[way].append((ops, q[49], q[98]))
                print(
                    f"round {r + 1} {way:8} {clients} clients: {ops:6.1f} stores/s, p50 {q[49]:6.1f} ms, "
                    f"p99 {q[98]:6.1f} ms ({len(latencies)} stores)",
                    flush=True,
                )
    finally:
        pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    base = [statistics.median(x) for x in zip(*results["008"], strict=True)]
    print(f"median of {rounds} rounds, against 008 (the baseline of issue 36's load figure):")
    for way, rows in results.items():
        ops, p50, p99 = (statistics.median(x) for x in zip(*rows, strict=True))
        print(
            f"  {way:8}: {ops:6.1f} stores/s ({ops / base[0]:.2f}x), p50 {p50:6.1f} ms ({p50 / base[1]:.2f}x), "
            f"p99 {p99:6.1f} ms ({p99 / base[2]:.2f}x)"
        )


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()
    anyio.run(main, arguments.clients, arguments.seconds, arguments.rounds)
