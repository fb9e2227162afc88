"""A `frobozz` command's whole life, start to exit, with the imports frozen at exit (what `frobozz.cli.main`
does) against freed one by one at the interpreter's teardown (what it did): a stdio MCP server that its client
ends by closing stdin (as MCP SDK clients do; claude sends SIGINT, which skips the teardown either way) and a
one-shot `frobozz games list`.

Run: .venv/bin/python bench/cli_exit.py [--runs N]
Prints the CPU seconds (the child's own, from RUSAGE_CHILDREN) and the wall time of each way, their medians and
the ratio, in one run; the two ways take turns, so a busy machine weighs on both alike. Baseline (issue 37, a
faster suite): the teardown way; a test run starts about 600 Python processes, most of them `frobozz` commands.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# The teardown way: the same entry point, its exit handler made a no-op.
UNFROZEN = "from frobozz.cli import _app; _app._skip_freeing_at_exit = lambda: None; _app.main()"
WAYS = {
    "frozen at exit (now)": [sys.executable, "-m", "frobozz"],
    "freed at exit (before)": [sys.executable, "-c", UNFROZEN],
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def run(command: list[str], *, server: bool, home: str) -> tuple[float, float]:
    """CPU seconds and wall seconds of one command: a server answers `initialize` and then its stdin closes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    args = [*command, "serve", "handoff"] if server else [*command, "games", "list"]
    env = {"HOME": home, "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert child.stdin is not None and child.stdout is not None
    if server:
        child.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        child.stdin.flush()
        answer = json.loads(child.stdout.readline())
        assert "result" in answer, answer
    child.stdin.close()
    child.stdout.read()
    if child.wait() != 0:
        raise SystemExit(f"{' '.join(args)} exited with {child.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="runs of each command each way")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        for server, name in ((True, "serve handoff, stdin closed"), (False, "games list")):
            seen: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
            for _ in range(runs):
                for way, command in WAYS.items():
                    seen[way].append(run(command, server=server, home=home))
            print(f"{name} ({runs} runs each way)")
            medians = {}
            for way, figures in seen.items():
                cpu = statistics.median(c for c, _ in figures)
                wall = statistics.median(w for _, w in figures)
                medians[way] = cpu
                print(f"  {way:24} CPU {cpu:.3f} s   wall {wall:.3f} s   (median)")
            now, before = medians.values()
            print(f"  ratio now/before, CPU: {now / before:.2f}")


if __name__ == "__main__":
    main()
