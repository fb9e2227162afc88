"""Session store benchmark: what mirroring claude's transcript into Postgres adds per turn (batched and
eager) against no store, and the time to resume a long session from Postgres on a machine that never saw
it against resuming it from local disk, in one run. The real claude CLI against a scripted model.

Run: .venv/bin/python bench/session_store.py [--turns 60] [--long 500]
Targets (issue 22): under 1 ms per turn batched; resume from Postgres within 2x of local disk.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from _ending import end_with_the_bench, scratch_postgres

from frobozz.engine import Engine, EngineOptions, Result
from frobozz.engine._mirror import TranscriptMirror
from frobozz.engine.testing import ScriptedModel
from frobozz.memory import MemorySettings, TranscriptStore


def answer(request) -> str:
    return f"Answer to {request.last_user_text()[:40]}: go north, then open the door."


class Timed(TranscriptMirror):
    """The mirror, with the time the read loop spends handing it frames (its only cost on the stream)."""

    spent = 0.0

    def enqueue(self, frame):
        t0 = time.perf_counter()
        super().enqueue(frame)
        Timed.spent += time.perf_counter() - t0


def options(model: ScriptedModel, home: Path, **more) -> EngineOptions:
    return EngineOptions(env={**model.env(), "HOME": str(home), "CLAUDE_CODE_MAX_RETRIES": "0"}, cwd=home, **more)


async def turns(model: ScriptedModel, home: Path, count: int, **more) -> tuple[list[float], str]:
    """Seconds per turn (send to Result) over `count` turns of one session, and its id."""
    took = []
    async with Engine(options(model, home, **more)) as engine:
        await engine.start()
        for turn in range(count):
            t0 = time.perf_counter()
            await engine.send(f"turn {turn}: where now?")
            async for event in engine.events():
                if isinstance(event, Result):
                    break
            took.append(time.perf_counter() - t0)
        session = engine.session_id
    assert session
    return took, session


async def resume(model: ScriptedModel, home: Path, session: str, **more) -> float:
    """Seconds from start() of a resume to the Result of one more turn."""
    t0 = time.perf_counter()
    async with Engine(options(model, home, **more)) as engine:
        await engine.start(session)
        await engine.send("and now?")
        async for event in engine.events():
            if isinstance(event, Result):
                break
    return time.perf_counter() - t0


async def main(args: argparse.Namespace) -> None:
    import frobozz.engine._store_link as store_link

    store_link.TranscriptMirror = Timed  # type: ignore[misc]
    with tempfile.TemporaryDirectory() as scratch:
        server = scratch_postgres(scratch)
        store = await TranscriptStore.open(MemorySettings(database_url=server.get_uri()))
        try:
            async with ScriptedModel(answer) as model:
                print(
                    f"{args.turns} turns per session, the real claude CLI, a scripted model, Postgres on this machine"
                )
                rows = {}
                for name, more in (
                    ("no store", {}),
                    ("batched", {"session_store": store}),
                    ("eager", {"session_store": store, "session_store_flush": "eager"}),
                ):
                    home = Path(tempfile.mkdtemp(dir=scratch))
                    await turns(model, home, 3, **more)  # warm up
                    Timed.spent = 0.0
                    took, _ = await turns(model, home, args.turns, **more)
                    rows[name] = (statistics.median(took), Timed.spent / args.turns)
                base = rows["no store"][0]
                print(f"{'mode':>10} {'ms/turn (median)':>17} {'added':>9} {'in the read loop':>17}")
                for name, (median, loop) in rows.items():
                    print(f"{name:>10} {1000 * median:>17.1f} {1000 * (median - base):>+8.2f}  {1000 * loop:>13.3f} ms")
                print(
                    f"target: batched under 1 ms per turn; measured {1000 * (rows['batched'][0] - base):+.2f} ms "
                    f"end to end (noise of the CLI's own turn is larger), {1000 * rows['batched'][1]:.3f} ms "
                    f"on the event stream"
                )

                origin = Path(tempfile.mkdtemp(dir=scratch))
                t0 = time.perf_counter()
                _, session = await turns(model, origin, args.long, session_store=store)
                print(
                    f"\na session of {args.long} turns mirrored in {time.perf_counter() - t0:.1f} s "
                    f"({len(await store.load({'project_key': _key(origin), 'session_id': session}))} entries)"
                )
                local = await resume(model, origin, session)
                fresh = Path(tempfile.mkdtemp(dir=scratch))
                remote = await resume(model, fresh, session, session_store=store, session_project=_key(origin))
                print(f"resume from local disk   {1000 * local:8.0f} ms")
                print(
                    f"resume from Postgres     {1000 * remote:8.0f} ms   ratio {remote / local:.2f}x of local disk "
                    f"(target within 2x)"
                )
        finally:
            await store.aclose()
            server.cleanup()


def _key(home: Path) -> str:
    from frobozz.engine import project_key

    return project_key(home)


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60, help="turns per session for the per-turn figures")
    parser.add_argument("--long", type=int, default=500, help="turns of the session resumed")
    anyio.run(main, parser.parse_args())
