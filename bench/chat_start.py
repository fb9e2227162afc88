"""The hub's four servers for `frobozz chat`, two ways, in one run: as subprocesses claude starts over stdio
(as chat did before; the baseline), and served in the chat's own process over the control channel (as now).
Each way: seconds from the session's making to the moment a first turn may go with its tools (stdio: once
claude says all four are connected, which chat waited for before its first prompt), to the first text delta,
and the CPU seconds of the whole tree (this process, claude, the servers), each round a fresh process.

Run: .venv/bin/python bench/chat_start.py [--rounds 5]
The scripted Messages API answers at once: what is measured is start-up, not a model's latency.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

WAYS = ("stdio", "in-process")
SERVERS = ["cortex", "fetch", "forge", "handoff"]


async def one(way: str) -> dict[str, float]:
    """One chat's start, timed from before its servers' configuration is made (in-process, the factories
    import the servers' modules: that is part of the cost). No tool is called: the memory servers' pool and
    embedding model, shared in chat, open at their first use, so they are not shared here."""
    from functools import partial

    from frobozz.engine import EngineOptions, Session, StreamEvent
    from frobozz.engine.testing import ScriptedModel
    from frobozz.servers import config_for, load_server

    home = tempfile.mkdtemp()
    async with ScriptedModel(lambda _: "West of House.") as model:
        t0 = time.perf_counter()
        where = (
            {"mcp_config": config_for(SERVERS)}
            if way == "stdio"
            else {"in_process_servers": {name: partial(load_server, name) for name in SERVERS}}
        )
        options = EngineOptions(
            env={**model.env(), "HOME": home, "CLAUDE_CODE_MAX_RETRIES": "0"},
            cwd=home,
            include_partial_messages=True,
            strict_mcp_config=True,
            allowed_tools=[f"mcp__{name}" for name in SERVERS],
            **where,
        )
        first = float("nan")  # (no text came: said as nan, not a crash)
        async with Session(options) as session:
            await session.wait_for_mcp(SERVERS)  # (in-process: nothing to wait for)
            ready = time.perf_counter() - t0
            await session.send("Where am I?")
            async for event in session.events():
                if isinstance(event, StreamEvent) and event.text_delta:
                    first = time.perf_counter() - t0
                    break
    return {"ready": ready, "first": first}


def round_of(way: str) -> dict[str, float]:
    """One start in a fresh process; its CPU and its children's, from this side."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, __file__, "--one", way], capture_output=True, text=True, check=True, env=os.environ
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", choices=WAYS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        import anyio

        print(json.dumps(anyio.run(one, args.one)))
        return
    os.environ.setdefault("FROBOZZ_DATA_DIR", tempfile.mkdtemp())
    results: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:  # interleaved, so a machine that slows down slows both
            results[way].append(round_of(way))
    medians = {
        way: {k: statistics.median(r[k] for r in rs) for k in ("ready", "first", "cpu")} for way, rs in results.items()
    }
    for way, m in medians.items():
        print(
            f"{way:>10}: ready for a first turn {m['ready']:.2f} s, first text {m['first']:.2f} s, CPU {m['cpu']:.2f} s"
        )
    base, now = medians["stdio"], medians["in-process"]
    print(
        f"in-process / stdio (medians of {args.rounds}): ready {now['ready'] / base['ready']:.2f}x, "
        f"first text {now['first'] / base['first']:.2f}x, CPU {now['cpu'] / base['cpu']:.2f}x"
    )


if __name__ == "__main__":
    main()
