"""What a killed process leaves behind: its descendants, and a wait for them to end."""

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
