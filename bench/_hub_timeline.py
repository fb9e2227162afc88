"""The hub of `bench/cortex_load.py --timeline`: `frobozz serve …` with each HTTP request's time taken apart,
measured from outside (the parts are wrapped here, nothing in frobozz changes). Per request: when it arrived
and was answered, the tool's own span (store or search), the embedding (from the call to the vectors) and the
model run that served it (the batch's start and end, its size), each pool connection (the wait for it, and how
long it was held), each SQL statement; plus, across the run, how late the event loop woke from a 5 ms sleep.
Written as JSON to $FROBOZZ_BENCH_TIMELINE when the hub exits. Times are CLOCK_MONOTONIC, which the bench's own
process shares, so a client's view of a call can be set beside the hub's.

Run as a script: `python bench/_hub_timeline.py serve cortex --http --port N` (the arguments of `frobozz`)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

now = time.monotonic
requests: list[dict[str, Any]] = []
model_runs: list[tuple[float, float, int, str]] = []  # start, end, texts, thread
loop_lag: list[tuple[float, float]] = []  # when, how late (s)
collections: list[tuple[float, float, int]] = []  # the garbage collector's pauses: start, end, generation
current: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("request", default=None)
_FUNCTION = re.compile(r"cortex_[a-z_]+|memory_words|FROM memories m |FROM memories")


def phase(name: str, start: float, end: float) -> None:
    request = current.get()
    if request is not None:
        request["phases"].append((name, start, end))


def install() -> None:
    import asyncpg.connection

    import frobozz.servers
    from frobozz.memory import _embeddings, _minilm, _store

    hub_app = frobozz.servers.hub_app

    def timed_hub_app(*args: Any, **kwargs: Any) -> Callable[..., Any]:
        app = hub_app(*args, **kwargs)

        async def timed(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await app(scope, receive, send)
            request: dict[str, Any] = {"start": now(), "phases": []}
            current.set(request)

            async def sending(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    request["sent"] = now()
                await send(message)

            await app(scope, receive, sending)
            request["end"] = now()
            requests.append(request)

        return timed

    frobozz.servers.hub_app = timed_hub_app

    for tool in ("store", "search"):
        inner = getattr(_store.MemoryStore, tool)

        def wrapped(self: Any, *args: Any, _inner: Any = inner, _tool: str = tool, **kwargs: Any) -> Any:
            async def run() -> Any:
                start = now()
                try:
                    return await _inner(self, *args, **kwargs)
                finally:
                    request = current.get()
                    if request is not None:
                        request["tool"] = _tool
                    phase("tool", start, now())

            return run()

        setattr(_store.MemoryStore, tool, wrapped)

    connection = _store.MemoryStore.connection

    @asynccontextmanager
    async def timed_connection(self: Any) -> AsyncIterator[Any]:
        asked = now()
        async with connection(self) as c:
            got = now()
            phase("pool wait", asked, got)
            try:
                yield c
            finally:
                phase("connection held", got, now())

    _store.MemoryStore.connection = timed_connection  # type: ignore[method-assign]

    for method in ("execute", "fetch", "fetchrow", "fetchval"):
        inner_sql = getattr(asyncpg.connection.Connection, method)

        async def sql(self: Any, query: str, *args: Any, _inner: Any = inner_sql, **kwargs: Any) -> Any:
            start = now()
            try:
                return await _inner(self, query, *args, **kwargs)
            finally:
                found = sorted(_FUNCTION.findall(query), key=len)
                phase(f"sql {found[-1].strip() if found else query.split()[0]}", start, now())

        setattr(asyncpg.connection.Connection, method, sql)

    embed = _embeddings.LocalEmbedder.embed

    async def timed_embed(self: Any, texts: list[str]) -> list[list[float]]:
        start = now()
        try:
            return await embed(self, texts)
        finally:
            phase("embed", start, now())

    _embeddings.LocalEmbedder.embed = timed_embed  # type: ignore[method-assign]

    encode = _minilm.MiniLM.encode

    def timed_encode(self: Any, texts: list[str]) -> Any:
        start = now()
        try:
            return encode(self, texts)
        finally:
            model_runs.append((start, now(), len(texts), threading.current_thread().name))

    _minilm.MiniLM.encode = timed_encode  # type: ignore[method-assign]

    import anyio

    started = False  # the loop-lag probe starts with the first request
    app_factory = frobozz.servers.hub_app

    def with_probe(*args: Any, **kwargs: Any) -> Callable[..., Any]:
        app = app_factory(*args, **kwargs)

        async def probed(scope: dict[str, Any], receive: Any, send: Any) -> None:
            nonlocal started
            if not started:
                started = True
                asyncio.get_running_loop().create_task(probe())
            await app(scope, receive, send)

        return probed

    async def probe() -> None:
        while True:
            start = now()
            await anyio.sleep(0.005)
            loop_lag.append((start, now() - start - 0.005))

    frobozz.servers.hub_app = with_probe

    import gc

    collecting: list[float] = []

    def collected(stage: str, info: dict[str, int]) -> None:
        if stage == "start":
            collecting.append(now())
        elif collecting:
            collections.append((collecting.pop(), now(), info["generation"]))

    gc.callbacks.append(collected)


def report(path: str, start: float, end: float) -> None:
    """Where the time of the requests that arrived between `start` and `end` went: the mean of each part, for all
    requests of each tool and for the slowest 2% (the p99's neighbourhood); the model's runs; the loop's lag."""
    import statistics

    data = json.load(open(path))
    runs = [r for r in data["model_runs"] if start <= r[0] <= end]
    chosen = [r for r in data["requests"] if start <= r["start"] <= end and "tool" in r and "sent" in r]
    for r in chosen:
        parts: dict[str, float] = {}
        phases = r["phases"]
        tool = next(p for p in phases if p[0] == "tool")
        parts["before tool (SDK in)"] = tool[1] - r["start"]
        parts["after tool (SDK out)"] = r["sent"] - tool[2]
        for name, s, e in phases:
            if name in ("tool", "connection held"):
                continue
            parts[name] = parts.get(name, 0.0) + e - s
            if name == "embed":
                served = [m for m in runs if m[0] >= s - 1e-4 and m[1] <= e + 1e-4]
                if served:
                    m = max(served, key=lambda m: m[1])
                    parts["embed: queued"] = m[0] - s
                    parts["embed: model run"] = m[1] - m[0]
                    parts["embed: woken"] = e - m[1]
                    parts["embed: batch texts"] = m[2] / 1000
        r["parts"], r["total"] = parts, r["sent"] - r["start"]
    for tool in ("store", "search"):
        mine = sorted((r for r in chosen if r["tool"] == tool), key=lambda r: r["total"])
        if len(mine) < 50:
            continue
        slow = mine[-max(len(mine) // 50, 1) :]
        names = sorted({n for r in mine for n in r["parts"]})
        for label, group in (("all", mine), (f"slowest {len(slow)}", slow)):
            mean = {n: 1000 * sum(r["parts"].get(n, 0.0) for r in group) / len(group) for n in names}
            total = 1000 * statistics.mean(r["total"] for r in group)
            shown = ", ".join(f"{n} {v:.1f}" for n, v in mean.items() if v >= 0.05)
            print(f"    hub {tool} {label}: total {total:.1f} ms = {shown}", flush=True)
    if runs:
        busy = sum(m[1] - m[0] for m in runs) / (end - start)
        print(
            f"    model runs: {len(runs)}, {statistics.mean(m[2] for m in runs):.1f} texts each, "
            f"{1000 * statistics.mean(m[1] - m[0] for m in runs):.1f} ms each, busy {busy:.0%} of the row",
            flush=True,
        )
    pauses = [(e - s, g) for s, e, g in data["gc"] if start <= s <= end]
    if pauses:
        print(
            "    garbage collections: "
            + ", ".join(
                f"generation {g}: {sum(1 for p in pauses if p[1] == g)}, "
                f"{1000 * sum(p[0] for p in pauses if p[1] == g):.0f} ms in all, "
                f"longest {1000 * max((p[0] for p in pauses if p[1] == g), default=0):.1f} ms"
                for g in (0, 1, 2)
            ),
            flush=True,
        )
    lag = sorted(1000 * late for when, late in data["loop_lag"] if start <= when <= end)
    if len(lag) > 10:
        q = statistics.quantiles(lag, n=100)
        print(f"    event loop lag (5 ms sleeps): p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, max {lag[-1]:.1f} ms")


def dump() -> None:
    with open(os.environ["FROBOZZ_BENCH_TIMELINE"], "w") as f:
        json.dump({"requests": requests, "model_runs": model_runs, "loop_lag": loop_lag, "gc": collections}, f)


if __name__ == "__main__":
    import sys

    sys.path[0] = os.getcwd()  # frobozz from the checkout it is started in, as `python -m frobozz` would

    import uvicorn

    install()
    shutdown = uvicorn.Server.shutdown

    async def shutdown_and_dump(self: Any, *args: Any, **kwargs: Any) -> None:  # uvicorn re-raises SIGTERM after
        await shutdown(self, *args, **kwargs)
        dump()

    uvicorn.Server.shutdown = shutdown_and_dump  # type: ignore[method-assign]
    from frobozz.cli import main

    sys.argv[0] = "frobozz"
    main()
