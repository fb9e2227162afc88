"""Benches that start their own Postgres (pgserver) stop it in a `finally`, and pgserver removes its folder
from an exit handler. SIGTERM (`timeout`, `kill`) ends a process at once, past both, and left that Postgres
running on its scratch folder; raised as SystemExit instead, the `finally` blocks and exit handlers run."""

from __future__ import annotations

import signal
import sys
from types import FrameType


def exit_on_sigterm() -> None:
    """From now on SIGTERM ends this process as an exception would, with status 143 (what a shell reports for a
    process SIGTERM ended)."""

    def end(signum: int, _frame: FrameType | None) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, end)
