"""Runner settings: the games part's settings plus where runs are kept and the runner's limits."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from frobozz.games import GamesSettings


class RunnerSettings(GamesSettings):
    correction_limit: int = Field(default=5, ge=0, description="Replies without a command tolerated per run.")
    claude_model: str | None = Field(default=None, description="The model claude plays with, unless --model.")
    handoff_threshold: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description=("With --memory: how full the context window may get before the player is asked to hand off."),
    )
    context_window: int | None = Field(
        default=None,
        ge=1000,
        description=("The context window's size in tokens; unset: the one claude reports for its model."),
    )
    memory_deadline: float = Field(
        default=1.5,
        gt=0,
        le=60,
        description=(
            "With --memory: seconds recall and a new window's orientation may take before the turn goes without "
            "what they have not found yet (raise it for a slow remote embedding service)."
        ),
    )

    worker_heartbeat: float = Field(
        default=30.0,
        ge=0.5,
        le=3600,
        description=("Seconds without a heartbeat after which a worker's run is given to another worker."),
    )
    worker_retry: float = Field(
        default=2.0,
        ge=0,
        le=3600,
        description=(
            "Seconds before a run that stopped on an error (claude's process did not start) is tried again, times "
            "the errors it has had: 2, then 4."
        ),
    )

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"
