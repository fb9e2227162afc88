"""Routines' settings: the runner's (where runs are kept, the worker's heartbeat) plus the routines' limits."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from frobozz.runner import RunnerSettings


class RoutineSettings(RunnerSettings):
    routine_concurrency: int = Field(
        default=4,
        ge=1,
        le=256,
        description=(
            "How many routine firings run at once across every worker on the database (the queue enforces it)."
        ),
    )
    routine_tick: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description=(
            "Seconds between a worker's looks at which routines are due (mail and feeds are looked at every --poll)."
        ),
    )

    routine_idle: bool = Field(
        default=True,
        description=("Wait for mail with IMAP IDLE where the server has it (false: look every --poll only)."),
    )

    routine_read_timeout: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description=(
            "Seconds a feed has to send its whole answer, and an IMAP server to answer a command, before the read "
            "is given up and recorded as the routine's problem."
        ),
    )

    routine_warm: int = Field(
        default=2,
        ge=0,
        le=64,
        description=(
            "Routines per worker whose next firing's claude is kept started (an inbox's or a feed's once read, a "
            "schedule's from a minute before it is due), with the memory loop's sidecars; 0: every firing starts "
            "its claudes cold."
        ),
    )

    routine_recall_queries: bool = Field(
        default=False,
        description=(
            "Before a firing's message goes, ask the sidecar model for recall queries (a model turn: 0.3-0.9 s more "
            "before the first request). False: recall searches memory with the message itself (the prompt and the "
            "mail or entry), which takes milliseconds."
        ),
    )

    @property
    def routines_dir(self) -> Path:
        return self.data_dir / "routines"
