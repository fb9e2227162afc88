"""Children that die with their parent (a leaf module that imports nothing of Frobozz).

A process killed with SIGKILL cannot stop its children: claude, mid-request to a model server that
died with it, went on retrying for minutes. On Linux the kernel does it for us: PR_SET_PDEATHSIG has
the child sent SIGKILL when the thread that started it ends (processes are started from the event
loop's thread, which lives as long as the process), and it survives exec. anyio's open_process takes
no preexec_fn to make that call, so the command runs through util-linux's `setpriv --pdeathsig`
(part of every Debian and most Linux installs), which sets it and execs the command in place: same
pid, same pipes. Without setpriv, children still end when their stdin closes."""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Sequence


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv") if sys.platform.startswith("linux") else None


def dying_with_parent(command: Sequence[str]) -> list[str]:
    """`command`, made to be killed when this process dies (where the system can). A program that cannot
    be found is left as it is, so that starting it fails as it would have (not in setpriv)."""
    setpriv = _setpriv()
    if setpriv and command and shutil.which(command[0]):
        return [setpriv, "--pdeathsig", "KILL", "--", *command]
    return list(command)


def as_account(command: Sequence[str], uid: int, gid: int) -> list[str] | None:
    """`command` run as uid:gid with no supplementary groups, dying with its parent, through setpriv (which
    every event loop can start; uvloop takes no user= for a subprocess). None without setpriv."""
    setpriv = _setpriv()
    if not setpriv or not command or not shutil.which(command[0]):
        return None
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--pdeathsig", "KILL", "--", *command]
