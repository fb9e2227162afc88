"""How long a traced command takes to exit once its work is done: `frobozz play zork1 --player walkthrough
--max-turns 3 --trace` timed from its run's summary line (the work done) to its exit, with the OTLP endpoint
at a port nothing listens on (the backend down), at a real receiver on this machine (the backend up), and
without `--trace`; in one run, the three taking turns, each round a fresh data folder (no local span store:
FROBOZZ_TRACE_KEEP_DAYS=0, so only the exporter is timed).

Baseline (the tracing issue's "a backend that is down costs the run nothing"): before 6d67928 the SDK's own
exit flush sat through the exporter's retries (1 + 2 + 4 s) with the backend down. Run this file from a
checkout of 370cab2 for the figures before (it needs nothing newer), and from this one for after.

Run: .venv/bin/python bench/trace_exit.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.otlp: the real receiver the tests use

from tests.otlp import receiver

PLAY = [sys.executable, "-m", "frobozz", "play", "zork1", "--player", "walkthrough", "--max-turns", "3"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exit_lag(endpoint: str | None) -> float:
    """Seconds from the run's summary line on stderr to the process's exit."""
    folder = Path(tempfile.mkdtemp(prefix="frobozz-trace-exit-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(FROBOZZ_DATA_DIR=str(folder / "data"), HOME=str(folder), FROBOZZ_TRACE_KEEP_DAYS="0")
    env.pop("FROBOZZ_DATABASE_URL", None)
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    command = [*PLAY, "--trace"] if endpoint else PLAY
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    done = None
    for line in process.stderr:
        if done is None and "max turns" in line:
            done = time.monotonic()
    process.wait()
    if done is None:
        raise SystemExit(f"the run did not end as expected (exit {process.returncode})")
    return time.monotonic() - done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    lags: dict[str, list[float]] = {"no --trace": [], "backend up": [], "backend down": []}
    with receiver() as up:
        for _ in range(rounds):
            lags["no --trace"].append(exit_lag(None))
            lags["backend up"].append(exit_lag(up.url))
            lags["backend down"].append(exit_lag(f"http://127.0.0.1:{closed_port()}"))
    base = statistics.median(lags["no --trace"])
    print(f"exit after the work is done, median of {rounds} (each round a fresh process and data folder):")
    for name, values in lags.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {name:13} {statistics.median(values):5.2f} s  ({shown})  {statistics.median(values) / base:5.1f}x")


if __name__ == "__main__":
    main()
