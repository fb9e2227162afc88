"""`frobozz chat` on a database that hangs (accepts connections, never answers: every Postgres process stopped,
or a network that drops everything), in one run: a turn, a `remember:` line, leaving with /exit, and a chat
started while it hangs. A TCP stand-in in front of a scratch Postgres (tests/black_hole.py) hangs it; the
scripted model answers at once, so what is measured is the chat's waiting on its database.

Run: source scripts/env && .venv/bin/python bench/chat_hung_database.py [--rounds 3]
Baseline (before the stop that made memory go off on a silent database; the same scripted chat, medians of 3):
a turn 14.2 s, `remember:` 74.4 s, leaving 72.8 s, a start 60 s and more before its error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _ending import end_with_the_bench, scratch_postgres

from tests.black_hole import BlackHole

BASELINE = {"turn": 14.2, "remember": 74.4, "leave": 72.8, "start": 60.0}


def chat(env: dict[str, str], namespace: str) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "frobozz", "chat", "--model", "scripted", "--namespace", namespace],
        env=env,
        encoding="utf-8",
        timeout=300,
    )
    child.expect_exact("you> ")
    return child


def said(child: pexpect.spawn, line: str, answer: str) -> float:
    started = time.monotonic()
    child.sendline(line)
    child.expect_exact(answer)
    child.expect_exact("you> ")
    return time.monotonic() - started


def one_round(url: str, scratch: Path, n: int) -> dict[str, float]:
    home = scratch / f"home{n}"
    home.mkdir()
    base = {**os.environ, "HOME": str(home), "FROBOZZ_DATA_DIR": str(scratch / f"data{n}"), "NO_COLOR": "1"}
    with BlackHole(url) as hole:
        env = {**base, "FROBOZZ_DATABASE_URL": hole.url, "COLUMNS": "200"}
        child = chat(env, f"hung{n}")
        said(child, "first", "You said: first")
        hole.hang()
        first = said(child, "second", "You said: second")  # finds it silent: one bound and a probe
        turn = said(child, "third", "You said: third")
        remember = said(child, "remember: the lantern is in the cellar", "(scripted) Done:")
        started = time.monotonic()
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        leave = time.monotonic() - started
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "frobozz", "chat", "--model", "scripted", "--namespace", f"hung{n}"],
            env=env,
            input="",
            capture_output=True,
            timeout=300,
        )
        start = time.monotonic() - started
    return {"first turn": first, "turn": turn, "remember": remember, "leave": leave, "start": start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    end_with_the_bench()
    scratch = Path(tempfile.mkdtemp(prefix="frobozz-bench-hung-"))
    try:
        server = scratch_postgres(scratch)
        server.psql("CREATE DATABASE hung;")
        base, _, query = server.get_uri().partition("?")
        url = f"{base.rsplit('/', 1)[0]}/hung" + (f"?{query}" if query else "")
        rounds = [one_round(url, scratch, n) for n in range(args.rounds)]
        server.cleanup()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"chat with its database hung, medians of {args.rounds} (seconds; baseline before, ratio now/before):")
    for name in rounds[0]:
        median = statistics.median(r[name] for r in rounds)
        before = BASELINE.get(name)
        ratio = f"  (before {before:g} s: {median / before:.3f}x)" if before else ""
        print(f"  {name:>10}: {median:6.2f}{ratio}")


if __name__ == "__main__":
    main()
