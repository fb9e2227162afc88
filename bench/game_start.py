"""A game's start: the interpreter's worker process, from its spawn to its first answer (Zork I opened), run
as a script (`python -P …/_worker.py`, what `frobozz.games` does) against run as part of its package
(`python -m frobozz.games._worker`, what it did: the package's import, for nothing the worker uses).

Run: bin/frobozz games list >/dev/null; .venv/bin/python bench/game_start.py [--starts N]
Prints the CPU seconds (the child's own, from RUSAGE_CHILDREN) and the wall time of each way, their medians,
and the ratio, in one run; the two ways take turns, so a busy machine weighs on both alike. Baseline (issue 37,
a faster suite): the package way; a test run starts the worker about 150 times.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from frobozz.games import GameLibrary, GamesSettings
from frobozz.games._interpreter import WORKER
from frobozz.games._worker import read_frame, write_frame

WAYS = {
    "script (-P _worker.py)": [sys.executable, "-P", WORKER],
    "package (-m frobozz.games._worker)": [sys.executable, "-m", "frobozz.games._worker"],
}


def start(command: list[str], story: Path) -> tuple[float, float]:
    """CPU seconds and wall seconds from the worker's spawn to its answer to `open`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=scratch)
        assert worker.stdin is not None and worker.stdout is not None
        write_frame(worker.stdin, ("open", (str(story), None)))
        status, value = read_frame(worker.stdout)
        wall = time.perf_counter() - began
        worker.stdin.close()
        worker.wait()
    if status != "ok":
        sys.exit(f"the worker did not open {story.name}: {value}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=12, help="starts of each way")
    args = parser.parse_args()
    story = GameLibrary(GamesSettings()).find("zork1").path
    seen: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for _ in range(args.starts):
        for way, command in WAYS.items():
            seen[way].append(start(command, story))
    medians = {
        way: (statistics.median(c for c, _ in got), statistics.median(w for _, w in got)) for way, got in seen.items()
    }
    for way, (cpu, wall) in medians.items():
        print(f"{way:36} median {cpu:.3f} CPU-s, {wall:.3f} s wall to the first answer ({args.starts} starts)")
    (cpu, wall), (base_cpu, base_wall) = medians.values()
    print(f"script / package: {cpu / base_cpu:.2f}x the CPU, {wall / base_wall:.2f}x the wall time")


if __name__ == "__main__":
    main()
