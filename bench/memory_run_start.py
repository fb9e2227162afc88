"""A memory run's start (`play --memory`), two ways, in one run: its cortex and handoff as two stdio processes
claude starts (as runs did before, and as the runner alone still does; the baseline), and served in the run's own
process, with tools mode's game server (as `frobozz play` and `worker` now have it:
`serve_in_process(load_server)`). Each way, in text and in tools mode: seconds from play()'s call to the
first game move recorded, the whole run's wall time (a few turns and the lessons at the end), and the CPU seconds
of the whole tree (the run's process, claude, the servers claude started), each round a fresh process.

Run: bin/frobozz games list >/dev/null; .venv/bin/python bench/memory_run_start.py [--rounds 5] [--turns 3]
The scripted walkthrough player answers at once: what is measured is start-up, not a model's latency. A scratch
Postgres of the bench's own holds the memory; one run before the rounds warms it (migrations, the model's export).
Baseline (stdio), medians of 5 on 2 shared cores: first move 1.93 s text, 2.84 s tools; CPU 4.45 s, 6.18 s. In-process:
1.14 s and 2.24 s (0.59x, 0.79x); CPU 3.33 s and 5.04 s (0.75x, 0.82x). Tools mode waited for the game's stdio server.
With the game server in-process too (tools mode; medians of 3, a busier machine: stdio text 3.17 s, tools 4.54 s):
tools first move 1.66 s (0.37x), whole run 2.65 s (0.39x), CPU 3.72 s (0.55x).
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

from _ending import end_with_the_bench, scratch_postgres

WAYS = ("stdio", "in-process")
MODES = ("text", "tools")
FIGURES = ("first", "run", "cpu")


async def one(way: str, mode: str, turns: int) -> dict[str, float]:
    """One memory run of zork1 by the walkthrough player, timed from play()'s call (the memory's opening, claude's
    start, its servers' and the orientation are all in it)."""
    from frobozz.runner import RunConfig, RunnerSettings, play, serve_in_process
    from frobozz.servers import load_server

    serve_in_process(None if way == "stdio" else load_server)
    first: list[float] = []
    t0 = time.perf_counter()
    result = await play(
        RunConfig(game="zork1", player="walkthrough", mode=mode, max_turns=turns, memory="bench-start"),
        RunnerSettings(),
        on_turn=lambda _context, _record: first.append(time.perf_counter() - t0) if not first else None,
    )
    run = time.perf_counter() - t0
    assert result.turns == turns and first, result
    return {"first": first[0], "run": run}


def round_of(way: str, mode: str, turns: int) -> dict[str, float]:
    """One run in a fresh process; its CPU and its children's, from this side."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, __file__, "--one", way, mode, "--turns", str(turns)],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{way} {mode}: exit {done.returncode}\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return figures


def main() -> None:
    end_with_the_bench()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--one", nargs=2, metavar=("WAY", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        import anyio

        way, mode = args.one
        print(json.dumps(anyio.run(one, way, mode, args.turns)))
        return
    from frobozz.games import GameLibrary
    from frobozz.runner import RunnerSettings

    story = GameLibrary(RunnerSettings()).find("zork1")  # where it is installed
    os.environ.setdefault("FROBOZZ_GAMES_DIR", str(story.path.parent))
    with tempfile.TemporaryDirectory(prefix="frobozz-bench-") as scratch:
        server = scratch_postgres(scratch)
        try:
            os.environ["FROBOZZ_DATABASE_URL"] = server.get_uri()
            os.environ["FROBOZZ_DATA_DIR"] = os.path.join(scratch, "data")  # the runs, claude's files
            round_of("in-process", "text", args.turns)  # the schema made, the model exported: not in a round
            results: dict[tuple[str, str], list[dict[str, float]]] = {(w, m): [] for m in MODES for w in WAYS}
            for _ in range(args.rounds):
                for key in results:  # interleaved, so a machine that slows down slows both
                    results[key].append(round_of(*key, args.turns))
        finally:
            server.cleanup()
    medians = {key: {f: statistics.median(r[f] for r in rs) for f in FIGURES} for key, rs in results.items()}
    print(f"a memory run of {args.turns} turns, medians of {args.rounds} rounds (each a fresh process):")
    for (way, mode), m in medians.items():
        print(f"  {mode:>5} {way:>10}: first move {m['first']:.2f} s, whole run {m['run']:.2f} s, CPU {m['cpu']:.2f} s")
    for mode in MODES:
        base, now = medians["stdio", mode], medians["in-process", mode]
        print(
            f"  {mode:>5} in-process / stdio: first move {now['first'] / base['first']:.2f}x, "
            f"whole run {now['run'] / base['run']:.2f}x, CPU {now['cpu'] / base['cpu']:.2f}x"
        )


if __name__ == "__main__":
    main()
