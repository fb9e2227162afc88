"""Warm start: the time from "new session" to the first text delta, with claude started then (cold) and
with the engine's warm spare, started ahead of need with the same options (warm), in one run.

Run: .venv/bin/python bench/warm_start.py [--rounds 5]
Target (issue 37): warm under 0.3x cold. Each session comes IDLE seconds after the last, both ways. The
scripted Messages API answers at once, so what is measured is claude's start-up and the engine's, not a
model's latency; on a busy machine the figures are noisy. So the CPU time claude itself spends in the same
span is printed too (read from /proc: cold, all of it since claude started; warm, from the take on), which a
busy machine moves far less.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import anyio
import psutil

from frobozz.engine import EngineOptions, Session, StreamEvent, WarmSpare
from frobozz.engine.testing import ScriptedModel

IDLE = 1.0  # seconds between sessions, both ways: the time a person takes to start the next one


def cpu_seconds(pid: int | None) -> float:
    """The CPU time (user and system, every thread) a process has used so far; 0 when it cannot be read."""
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


async def first_delta(options: EngineOptions, spare: WarmSpare | None = None) -> tuple[float, float]:
    """Seconds from making the session to its first text delta (after IDLE seconds with nothing running), and
    the CPU seconds claude spent in that span (a taken spare is idle until the session's message)."""
    await anyio.sleep(IDLE)
    taken = spare.taken if spare is not None else 0
    t0 = time.perf_counter()
    async with Session(options, spare=spare) as session:
        base = cpu_seconds(session.engine.pid) if spare is not None and spare.taken > taken else 0.0
        await session.send("Where am I?")
        async for event in session.events():
            if isinstance(event, StreamEvent) and event.text_delta:
                elapsed = time.perf_counter() - t0
                cpu = cpu_seconds(session.engine.pid) - base
                break
    return elapsed, cpu


async def run(rounds: int) -> None:
    home = tempfile.mkdtemp()
    async with ScriptedModel(lambda _: "West of House. You are standing in an open field.") as model:
        options = EngineOptions(
            env={**model.env(), "HOME": home, "CLAUDE_CODE_MAX_RETRIES": "0"}, cwd=home, include_partial_messages=True
        )
        await first_delta(options)  # claude's files in the page cache, for both
        cold = [await first_delta(options) for _ in range(rounds)]
        warm: list[tuple[float, float]] = []
        async with WarmSpare() as spare:
            spare.prime(options)
            for _ in range(rounds):
                await spare.wait_ready()  # ahead of need: the previous session's spare had time to start
                warm.append(await first_delta(options, spare))
            taken = spare.taken
    c, w = statistics.median(t for t, _ in cold), statistics.median(t for t, _ in warm)
    cc, wc = statistics.median(u for _, u in cold), statistics.median(u for _, u in warm)
    print(
        f"new session to first text delta, median of {rounds}: cold {c * 1000:.0f} ms, warm {w * 1000:.0f} ms "
        f"(spare taken {taken} of {rounds} times)"
    )
    print(f"warm / cold = {w / c:.2f} (target < 0.3)")
    print(
        f"claude's CPU time in that span, median: cold {cc * 1000:.0f} ms, warm {wc * 1000:.0f} ms "
        f"(warm / cold = {wc / cc:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    anyio.run(run, parser.parse_args().rounds)


if __name__ == "__main__":
    main()
