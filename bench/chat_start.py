"""`frobozz chat` from its start to its first answer, as a user waits for it: a real chat process on a
pseudo-terminal (pexpect), the scripted model (`--model scripted`, offline), a scratch embedded Postgres,
the embedding model cached (one warm-up chat first, not counted). Printed for each run: when the prompt
showed, when the first answer came, and the CPU the chat and every process under it had used by then.

Run: .venv/bin/python bench/chat_start.py [--runs 3]
Baseline (commit 08c727e's parent, the same script, this machine): with the hub's four servers as processes of
their own the first answer came after 5.7-6.7 s and 9.3-10.8 s of CPU; in the chat's process, 2.8 s and 3.5-4.2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pexpect
import psutil


def cpu_of(pid: int) -> tuple[float, int]:
    """CPU seconds of the process and everything under it (the ended ones it waited for included)."""
    root = psutil.Process(pid)
    below = root.children(recursive=True)
    total = 0.0
    for process in (root, *below):
        try:
            t = process.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total, len(below)


def one(url: str, cache: Path, n: int) -> tuple[float, float, float, int]:
    env = {
        **os.environ,
        "HOME": tempfile.mkdtemp(prefix="frobozz-chat-home-"),
        "FROBOZZ_DATA_DIR": tempfile.mkdtemp(prefix="frobozz-chat-data-"),
        "FROBOZZ_CACHE_DIR": str(cache),
        "FROBOZZ_DATABASE_URL": url,
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    started = time.perf_counter()
    chat = pexpect.spawn(
        sys.executable,
        ["-m", "frobozz", "chat", "--model", "scripted", "--namespace", f"bench{n}"],
        env=env,
        encoding="utf-8",
        timeout=180,
    )
    chat.expect_exact("you> ")
    prompt = time.perf_counter() - started
    chat.sendline("hello there")
    chat.expect_exact("You said: hello there")
    answer = time.perf_counter() - started
    cpu, processes = cpu_of(chat.pid)
    chat.expect_exact("you> ")
    chat.sendeof()
    chat.expect(pexpect.EOF)
    return prompt, answer, cpu, processes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    import pgserver

    root = Path(tempfile.mkdtemp(prefix="frobozz-chat-start-"))
    pg = pgserver.get_server(root / "pg", cleanup_mode="delete")
    try:
        one(pg.get_uri(), root / "cache", 0)  # the embedding model fetched or exported once, as a user's first chat
        rows = [one(pg.get_uri(), root / "cache", n) for n in range(1, runs + 1)]
    finally:
        pg.cleanup()
    for prompt, answer, cpu, processes in rows:
        print(f"prompt after {prompt:.2f} s, first answer after {answer:.2f} s, {cpu:.1f} s of CPU", end="")
        print(f" ({processes} processes under the chat)")
    print(
        f"median: first answer after {statistics.median(r[1] for r in rows):.2f} s, "
        f"{statistics.median(r[2] for r in rows):.1f} s of CPU "
        f"(baseline, the servers as processes: 5.7-6.7 s, 9.3-10.8 s)"
    )


if __name__ == "__main__":
    main()
