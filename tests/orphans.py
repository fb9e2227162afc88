"""What a killed process leaves behind: its descendants, and a wait for them to end."""

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psutil


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def still_running(processes: list[psutil.Process], within: float) -> list[str]:
    """Those of `processes` still running after `within` seconds (a zombie has ended), as readable lines."""
    alive = processes
    for _ in range(max(1, int(within / 0.25))):
        _, alive = psutil.wait_procs([p for p in alive if running(p)], timeout=0.25)
        if not [p for p in alive if running(p)]:
            return []
    return [f"{p.pid} {' '.join(command_line(p))[:120]}" for p in alive if running(p)]


def running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def command_line(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return ["?"]


@contextlib.asynccontextmanager
async def descendants_seen(interval: float = 0.05) -> AsyncIterator[list[list[str]]]:
    """The command lines of every process below this one while the block runs, each once (looked at every
    `interval` seconds): what a run started, however briefly."""
    seen: list[list[str]] = []

    async def watch() -> None:
        while True:
            seen.extend(line for p in descendants(os.getpid()) if (line := command_line(p)) not in seen)
            await anyio.sleep(interval)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            yield seen
        finally:
            tg.cancel_scope.cancel()


def claudes_below(pid: int) -> list[psutil.Process]:
    """The claude processes below `pid`, by their program's name. claude's own children are not among them: a
    helper it starts has claude's command line until it has exec'd its own program (seen, its parent in D state)."""
    tree = descendants(pid)
    named = {p.pid for p in tree if (line := command_line(p)) and Path(line[0]).name == "claude"}
    return [p for p in tree if p.pid in named and parent(p) not in named]


def parent(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.Error:
        return None
