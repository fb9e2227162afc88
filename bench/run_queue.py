"""Runs at scale: runs per minute with 1, 2 and 4 `frobozz worker` processes (walkthrough player, text
mode, the real claude CLI against the scripted model), against `frobozz play --runs N --parallel K` playing
the same runs in one process; and the queue's own overhead per run: enqueue to start (an idle worker) and
finish to recorded (the run's end to its job logged done), from the database's own timestamps.

Run: bin/frobozz games list >/dev/null; .venv/bin/python bench/run_queue.py [--runs 8] [--max-turns 60]
Targets (issue 16): the queue adds under 100 ms per run; throughput grows with workers until the CPUs
are full (this machine has 2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import asyncpg
from _ending import end_with_the_bench, scratch_postgres

TARGET_MS = 100


def frobozz(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "frobozz", *args], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"frobozz {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def start_workers(env: dict[str, str], count: int) -> list[subprocess.Popen]:
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "frobozz", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for worker in workers:  # listening once it has said so
        assert worker.stderr is not None
        for line in worker.stderr:
            if "taking runs" in line:
                break
    return workers


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait(timeout=60)


async def wait_finished(url: str, ids: list[str]) -> None:
    connection = await asyncpg.connect(url)
    try:
        while await connection.fetchval(
            "SELECT count(*) FROM runs WHERE run_id = ANY($1) AND status <> 'finished'", ids
        ):
            await anyio.sleep(0.02)
    finally:
        await connection.close()


async def overheads(url: str, ids: list[str]) -> list[tuple[float, float]]:
    """(enqueue to start, finish to recorded) per run, in seconds."""
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT r.run_id, extract(epoch FROM r.started_at - r.queued_at) AS pickup, "
            "extract(epoch FROM (SELECT max(l.created) FROM pgqueuer_log l WHERE l.job_id = r.job_id AND "
            "l.status = 'successful') - r.ended_at) AS recorded FROM runs r WHERE r.run_id = ANY($1)",
            ids,
        )
    finally:
        await connection.close()
    return [(float(r["pickup"]), float(r["recorded"])) for r in rows if r["recorded"] is not None]


def queued(env: dict[str, str], url: str, runs: int, workers: int, turns: int) -> tuple[float, list[str]]:
    pool = start_workers(env, workers)
    try:
        t0 = time.perf_counter()
        ids = json.loads(
            frobozz(
                env,
                "play",
                "zork1",
                "--player",
                "walkthrough",
                "--queue",
                "--runs",
                str(runs),
                "--max-turns",
                str(turns),
                "--json",
            )
        )
        anyio.run(wait_finished, url, ids)
        return time.perf_counter() - t0, ids
    finally:
        stop_workers(pool)


def direct(env: dict[str, str], runs: int, parallel: int, turns: int) -> float:
    t0 = time.perf_counter()
    frobozz(
        env,
        "play",
        "zork1",
        "--player",
        "walkthrough",
        "--runs",
        str(runs),
        "--parallel",
        str(parallel),
        "--max-turns",
        str(turns),
        "--json",
    )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=60)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--probes", type=int, default=5, help="Single runs for the overhead, one at a time.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server = scratch_postgres(scratch)
        try:
            url = server.get_uri()
            env = {**os.environ, "FROBOZZ_DATA_DIR": str(Path(scratch) / "data"), "FROBOZZ_DATABASE_URL": url}
            env.pop("ANTHROPIC_BASE_URL", None)
            print(
                f"zork1, walkthrough player, text mode, {args.runs} runs of {args.max_turns} turns, "
                f"{os.cpu_count()} CPUs"
            )
            print(f"{'workers':>7} {'queue s':>8} {'runs/min':>9} {'direct s':>9} {'runs/min':>9} {'queue/direct':>13}")
            rates = {}
            for count in (int(w) for w in args.workers.split(",")):
                took, _ = queued(env, url, args.runs, count, args.max_turns)
                plain = direct(env, args.runs, count, args.max_turns)
                rates[count] = args.runs / took * 60
                print(
                    f"{count:>7} {took:>8.1f} {rates[count]:>9.1f} {plain:>9.1f} {args.runs / plain * 60:>9.1f} "
                    f"{took / plain:>12.2f}x"
                )
            pool = start_workers(env, 1)
            try:
                probes = []
                for _ in range(args.probes + 1):  # the first warms the worker up
                    ids = json.loads(
                        frobozz(
                            env, "play", "zork1", "--player", "walkthrough", "--queue", "--max-turns", "5", "--json"
                        )
                    )
                    anyio.run(wait_finished, url, ids)
                    probes += ids
            finally:
                stop_workers(pool)
            measured = anyio.run(overheads, url, probes[1:])
            pickup = statistics.median(p for p, _ in measured) * 1000
            recorded = statistics.median(r for _, r in measured) * 1000
            total = pickup + recorded
            print(
                f"queue overhead per run (median of {len(measured)}): enqueue to start {pickup:.1f} ms, "
                f"finish to recorded {recorded:.1f} ms, total {total:.1f} ms = {total / TARGET_MS:.2f}x the "
                f"{TARGET_MS} ms target"
            )
            scale = ", ".join(f"{w} workers {r / rates[min(rates)]:.2f}x" for w, r in rates.items())
            print(f"throughput against 1 worker: {scale}")
        finally:
            server.cleanup()  # before its folder goes


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    main()
