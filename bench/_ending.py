"""How a bench ends: the Postgres it started goes with it, however it ends.

Benches stop their Postgres in a `finally`, and pgserver stops it (and removes its folder) from an exit handler.
SIGTERM (`timeout`, `kill`) ends a process past both: `end_with_the_bench` raises it as SystemExit instead. SIGKILL
runs nothing at all: there a guard process stands in, the one `frobozz cortex …` and the other one-shot commands
start beside an embedded Postgres (`frobozz._pgguard`): it stops that Postgres once no live process holds it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pgserver import PostgresServer


def end_with_the_bench() -> None:
    """Called first thing: from now on SIGTERM ends this process as an exception would, with status 143 (what a
    shell reports for a process SIGTERM ended), and this process is a one-shot command to Frobozz's memory: an
    embedded Postgres it starts through Frobozz's settings (`MemorySettings`' data directory) is stopped when it
    exits and guarded against SIGKILL. One already running is left as it is."""
    from frobozz.memory import stop_embedded_at_exit

    def end(signum: int, _frame: FrameType | None) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, end)
    stop_embedded_at_exit()


def scratch_postgres(scratch: Path | str) -> PostgresServer:
    """A Postgres of the bench's own in `scratch`/pg, removed at exit. Guarded against SIGKILL: then the guard
    stops it and removes the whole of `scratch` (the bench's temporary folder), as the bench's exit would have."""
    from frobozz._pgguard import guard
    from frobozz.memory._database import embedded_server

    server = embedded_server(Path(scratch) / "pg", cleanup_mode="delete")  # (its socket where Frobozz's goes)
    guard(server.pgdata, scratch=Path(scratch))
    return server
