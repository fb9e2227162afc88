"""The memory loop's cost, in one run: the time it adds before a turn is sent (orientation, recall
with the sidecar's queries) and after it (archive, suggest), against the same turn sent bare through
the engine, on the real claude CLI answering from the project's scripted model, with N memories
in cortex (embedded Postgres, scratch).

Run: .venv/bin/python bench/memory_loop.py [--count 100000] [--turns 30]
Target (issue 14): recall adds under 50 ms p50 with a warm sidecar (the sidecar's own model time
excluded, and printed apart); archive and suggest add nothing to the time between turns.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _ending import end_with_the_bench
from cortex import OBJECTS, SUBJECTS, VERBS, load

from frobozz.engine import EngineOptions, Result, Session
from frobozz.engine.testing import ScriptedModel
from frobozz.loop import MemorySession
from frobozz.memory import MemoryService, MemorySettings
from frobozz.memory._database import stop_embedded

TARGET_MS = 50
THINK = 1.0  # seconds between a reply and the next message (a person reading it)


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def reply(request) -> str:  # the scripted model's handler
    text = request.last_user_text()
    if text.startswith("Write up to"):
        return "the quarterly report\nthe jazz concert"
    if text.startswith("Here is the last exchange"):
        return "The user asked about their notes."
    if text.startswith("Summarise"):
        return "An earlier talk."
    return "Noted."


def serve_model(found: multiprocessing.Queue) -> None:
    """The scripted model in a process of its own: its HTTP serving would otherwise share this
    interpreter (and its lock) with the loop being measured, which a remote model never does."""
    with ScriptedModel(reply) as model:
        found.put(model.env())
        parent = multiprocessing.parent_process()
        assert parent is not None
        parent.join()  # until the bench ends, or is killed: never outlive it


@contextlib.contextmanager
def model_process() -> Iterator[dict[str, str]]:
    found: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()
    process = multiprocessing.get_context("spawn").Process(target=serve_model, args=(found,), daemon=True)
    process.start()
    try:
        yield found.get(timeout=60)
    finally:
        process.terminate()
        process.join(5)


async def turn(send, events) -> tuple[float, float]:
    """The time `send()` takes (for the loop: all it does before the message is written to claude), and
    the time from then to the turn's result, in ms."""
    t = time.perf_counter()
    await send()
    sent = time.perf_counter()
    async for event in events():
        if isinstance(event, Result):
            break
    return 1000 * (sent - t), 1000 * (time.perf_counter() - sent)


async def main(count: int, turns: int) -> None:
    settings = MemorySettings(data_dir=Path(tempfile.mkdtemp(prefix="frobozz-loop-bench-")))
    service = MemoryService(settings)
    rng = random.Random(11)
    try:
        print(await load(await service.store(), count, rng, namespace="bench"))
        messages = [
            f"What did {rng.choice(SUBJECTS)} say when they {rng.choice(VERBS)} {rng.choice(OBJECTS)}?"
            for _ in range(turns)
        ]
        home = Path(tempfile.mkdtemp(prefix="frobozz-loop-home-"))
        with model_process() as model_env:
            options = EngineOptions(env={**model_env, "HOME": str(home)}, cwd=home, tools=())
            bare = []
            async with Session(options) as session:
                for text in messages:
                    await anyio.sleep(THINK)  # the same pause as with the loop: claude idle before each turn
                    bare.append((await turn(partial(session.send, text), session.events))[1])
            asked: list[float] = []
            async with MemorySession(options, service, namespace="bench", sidecar=options) as loop:
                ask = loop.pool.sidecar.ask

                async def timed_ask(prompt: str) -> str:
                    t = time.perf_counter()
                    try:
                        return await ask(prompt)
                    finally:
                        asked.append(1000 * (time.perf_counter() - t))

                loop._recall.ask = timed_ask  # the sidecar's own time, reported apart
                before, whole, sidecar_in_recall = [], [], []
                for text in messages:
                    with anyio.fail_after(120):  # the last turn's suggestions are in, and a person reads the
                        await loop.settled()  # reply: the sidecars are idle and warm, as between messages
                    await anyio.sleep(THINK)
                    seen = len(asked)
                    sending, answering = await turn(partial(loop.send, text), loop.events)
                    before.append(sending)
                    whole.append(answering)
                    sidecar_in_recall.append(asked[seen] if len(asked) > seen else 0.0)
                with anyio.fail_after(120):
                    await loop.settled()
                archived = len(await loop.sessions.transcript(loop.id))
    finally:
        await service.aclose()
        stop_embedded(settings, delete=True)
        shutil.rmtree(settings.data_dir, ignore_errors=True)

    own = [b - s for b, s in zip(before[1:], sidecar_in_recall[1:], strict=True)]  # the first carries orientation
    print(f"{turns} turns, {count} memories in cortex, claude on the scripted model (a process of its own)")
    print(f"bare turn through the engine     : p50 {pct(bare, 50):7.1f} ms, p95 {pct(bare, 95):7.1f} ms")
    print(
        f"turn with the loop (sent→result) : p50 {pct(whole, 50):7.1f} ms, p95 {pct(whole, 95):7.1f} ms "
        "(archive and suggest run beside it)"
    )
    print(f"before the turn, first (orientation, recall, the user's words archived): {before[0]:.1f} ms")
    print(
        f"before the turn, later (recall with the sidecar, nudge, archive): p50 {pct(before[1:], 50):7.1f} ms, "
        f"p95 {pct(before[1:], 95):7.1f} ms"
    )
    print(f"  the sidecar's own time (reported apart)    : p50 {pct(sidecar_in_recall[1:], 50):7.1f} ms")
    print(
        f"  the loop's own time, sidecar excluded      : p50 {pct(own, 50):7.1f} ms, p95 {pct(own, 95):7.1f} ms "
        f"({pct(own, 50) / TARGET_MS:.2f}x the target: p50 < {TARGET_MS} ms)"
    )
    print(
        f"after the turn: {archived} archive entries written by the observer, suggestions in the background; "
        f"time between turns added: {pct(whole, 50) - pct(bare, 50):+.1f} ms p50 against bare"
    )


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    anyio.run(main, args.count, args.turns)
