"""The test suite's cost, test by test: the CPU each test used (its pytest worker's own, and every process it
started and waited for: claude, the MCP servers claude started, the game's workers) against its wall time.
Where the suite's minutes go: tests that burn CPU (play fewer turns, start fewer processes) and tests that wait
(a timeout, a retry delay or a lease's TTL, which a setting can shorten). A process a test leaves to a fixture
(Postgres, Phoenix, a daemon) is counted where it is waited for, usually a module's or the session's end.

Record (a pytest plugin; any pytest arguments):
    SUITE_CPU_DIR=/tmp/suite-cpu PYTHONPATH=bench .venv/bin/python -m pytest -p suite_cpu -n 3 -q
Report:
    .venv/bin/python bench/suite_cpu.py /tmp/suite-cpu [--top 25]
Baseline (issue 37): `bin/test` took 750 s end to end on a fresh clone (583 tests); the target is 480 s.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BASELINE_SECONDS = 750.0  # issue 37: bin/test end to end, fresh clone
TARGET_SECONDS = 480.0


def _cpu() -> float:
    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Setup, call and teardown of one test, as one record in this worker's file."""
    folder = os.environ.get("SUITE_CPU_DIR")
    cpu, wall = _cpu(), time.monotonic()
    yield
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        record = {"test": item.nodeid, "cpu": _cpu() - cpu, "wall": time.monotonic() - wall}
        with open(Path(folder) / f"worker-{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


def report(folder: Path, top: int) -> None:
    by_worker = {path.name: [json.loads(line) for line in path.open()] for path in sorted(folder.glob("*.jsonl"))}
    records = [r for rows in by_worker.values() for r in rows]
    if not records:
        print(f"no records in {folder}: run pytest with -p suite_cpu and SUITE_CPU_DIR={folder} first")
        return
    cpu, wall = sum(r["cpu"] for r in records), sum(r["wall"] for r in records)
    elapsed = max(sum(r["wall"] for r in rows) for rows in by_worker.values())  # the slowest worker's share
    print(f"{len(records)} tests on {len(by_worker)} worker(s): {cpu:.0f} CPU-s, {wall:.0f} s of tests' wall time")
    print(f"waiting (wall - CPU, summed where positive): {sum(max(0, r['wall'] - r['cpu']) for r in records):.0f} s")
    print(
        f"pytest's share of the end-to-end time: about {elapsed:.0f} s; ratio to the issue's baseline "
        f"({BASELINE_SECONDS:.0f} s end to end): {elapsed / BASELINE_SECONDS:.2f}, to its target "
        f"({TARGET_SECONDS:.0f} s): {elapsed / TARGET_SECONDS:.2f}"
    )
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in records:
        entry = files[r["test"].split("::")[0]]
        entry[0] += r["cpu"]
        entry[1] += r["wall"]
        entry[2] += 1
    print(f"\nfiles by CPU (top {top}):    CPU-s   wall-s  tests")
    for name, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {c:8.1f} {w:8.1f} {n:6d}  {name}")
    print(f"\ntests by CPU (top {top}):    CPU-s   wall-s")
    for r in sorted(records, key=lambda r: -r["cpu"])[:top]:
        print(f"  {r['cpu']:8.1f} {r['wall']:8.1f}  {r['test'][:150]}")
    print(f"\ntests by waiting (top {top}): wall-CPU  wall-s")
    for r in sorted(records, key=lambda r: r["cpu"] - r["wall"])[:top]:
        print(f"  {r['wall'] - r['cpu']:8.1f} {r['wall']:8.1f}  {r['test'][:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the SUITE_CPU_DIR a run recorded into")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if not args.folder.is_dir():
        sys.exit(f"{args.folder} is not a folder")
    report(args.folder, args.top)


if __name__ == "__main__":
    main()
