"""The test suite's CPU by the kind of process that spent it: each real claude start, the MCP servers claude
starts, the `frobozz` commands the tests run, the pytest workers themselves, Postgres, Chromium. Where the
suite's CPU goes when no one test stands out: what a faster suite would have to start less often.

Linux process accounting (the kernel writes a record for every process as it ends: its command, parent and
CPU; `accton` from Debian's `acct`, as root) counts them all, those no test waits for too. pytest's workers
start the processes; a process's kind is its command and who started it (a python under claude is an MCP server).

    .venv/bin/python bench/suite_processes.py [PYTEST ARGUMENTS]     # default: -n 3 -q (the whole suite, as bin/test)
    .venv/bin/python bench/suite_processes.py --report FILE          # an accounting file recorded before

pytest dies with this script (setpriv's parent-death signal); killed with -9, the script leaves process
accounting on: `accton off` stops it.

Baseline (issue 37): `bin/test` took 750 s end to end on a fresh clone (583 tests); the target is 480 s, about
700 CPU-s of pytest on this machine's 2 cores.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from frobozz._children import dying_with_parent

TARGET_CPU = 700.0  # issue 37's 480 s end to end: ~400 s of pytest at ~1.75 cores busy
HZ = 100.0  # dump-acct's units (AHZ)


def _records(path: Path) -> list[tuple[str, float, int, int]]:
    """(command, CPU-s, pid, parent pid) of each process, in the order they ended."""
    out = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = [x.strip() for x in line.split("|")]
        rows.append((f[0], (float(f[2]) + float(f[3])) / HZ, int(f[9]), int(f[10])))
    return rows


def _kinds(rows: list[tuple[str, float, int, int]], pytest_pid: int | None, workers: bool) -> list[str]:
    """Each process's kind, by its command and its ancestors (a pid is reused: a process's parent is the first
    process of its parent's pid to end after it): claude; what claude started (its MCP servers, hooks); the
    pytest workers; what a test started (a `frobozz` command, a server, a game's worker); what those started."""
    ends: dict[int, list[int]] = collections.defaultdict(list)
    for i, (_, _, pid, _) in enumerate(rows):
        ends[pid].append(i)

    def parent(i: int) -> int | None:
        later = ends.get(rows[i][3], [])
        j = bisect.bisect_right(later, i)
        return later[j] if j < len(later) else None

    def ancestors(i: int) -> list[int]:
        chain: list[int] = []
        at = parent(i)
        while at is not None and len(chain) < 12:
            chain.append(at)
            at = parent(at)
        return chain

    kinds = []
    for i, (command, _, pid, ppid) in enumerate(rows):
        chain = ancestors(i)
        commands = [rows[a][0] for a in chain]
        depth = next((n for n, a in enumerate(chain) if rows[a][2] == pytest_pid), None) if pytest_pid else None
        if depth is not None and workers:
            depth -= 1  # (a worker between pytest and the test)
        if command.startswith("claude"):
            kinds.append("claude (a real claude start)")
        elif any(c.startswith("claude") for c in commands):
            kinds.append(f"{command}, started by claude (MCP servers, hooks)")
        elif pytest_pid is not None and pid == pytest_pid:
            kinds.append("pytest's main process" + ("" if workers else " (the tests, in-process)"))
        elif workers and pytest_pid is not None and ppid == pytest_pid:
            kinds.append("the pytest workers (the tests, in-process)")
        elif depth == 0:
            kinds.append(f"{command}, started by a test")
        elif depth is not None:
            kinds.append(f"{command}, started by what a test started")
        else:
            kinds.append(f"{command} <- {commands[0] if commands else '?'}")
    return kinds


def report(path: Path, machine_cpu: float | None = None, top: int = 20) -> None:
    rows = _records(path)
    pid_file = path.with_name("pytest.pid")
    pytest_pid, workers = None, True
    if pid_file.exists():  # "PID" or "PID workers" (pytest-xdist's -n): written by the run below
        said = pid_file.read_text().split()
        pytest_pid, workers = int(said[0]), "workers" in said
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for (_, cpu, _, _), kind in zip(rows, _kinds(rows, pytest_pid, workers), strict=True):
        kinds[kind][0] += 1
        kinds[kind][1] += cpu
    total = sum(cpu for _, cpu, _, _ in rows)
    print(f"{len(rows)} processes, {total:.0f} CPU-s" + (f" of the machine's {machine_cpu:.0f}" if machine_cpu else ""))
    print(f"ratio to issue 37's target (about {TARGET_CPU:.0f} CPU-s for pytest): {total / TARGET_CPU:.2f}")
    print(f"\nby kind (top {top}):   CPU-s  processes  CPU-s each")
    for kind, (n, cpu) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {cpu:9.1f} {n:10.0f} {cpu / n:11.2f}  {kind}")


def _machine_cpu() -> float:
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / HZ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", type=Path, help="report on an accounting file recorded before")
    parser.add_argument("--top", type=int, default=20)
    args, pytest_args = parser.parse_known_args()
    if args.report:
        report(args.report, top=args.top)
        return
    folder = Path(tempfile.mkdtemp(prefix="suite-processes-"))
    accounting = folder / "acct"
    accounting.touch()
    subprocess.run(["accton", str(accounting)], check=True, capture_output=True)  # root only
    before, started = _machine_cpu(), time.monotonic()
    try:
        arguments = pytest_args or ["-n", "3", "-q"]
        pytest = subprocess.Popen(dying_with_parent([sys.executable, "-m", "pytest", *arguments]))  # (same pid)
        xdist = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in arguments)
        (folder / "pytest.pid").write_text(f"{pytest.pid}{' workers' if xdist else ''}")
        code = pytest.wait()
    finally:
        subprocess.run(["accton", "off"], check=False, capture_output=True)
    print(f"\npytest: exit {code}, {time.monotonic() - started:.0f} s; records kept in {accounting}")
    report(accounting, _machine_cpu() - before, top=args.top)


if __name__ == "__main__":
    main()
