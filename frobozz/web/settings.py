"""Settings of the web view: where runs are (the runner's) and the database (memory's), FROBOZZ_* variables."""

from __future__ import annotations

from pydantic import Field

from frobozz.memory import MemorySettings
from frobozz.runner import RunnerSettings


class WebSettings(RunnerSettings, MemorySettings):
    web_poll_seconds: float = Field(
        default=0.5,
        gt=0,
        le=60,
        description=("How often a live run's page looks for new turns (its run directory, or the runs table)."),
    )
    web_agent_path: str = Field(
        default="/agent",
        pattern=r"^/[A-Za-z0-9/_-]*$",
        description=("Where the chat page finds the agent service's HTTP API (serve all --http mounts it at /agent)."),
    )
    web_page_size: int = Field(default=200, ge=1, le=10_000, description="The most runs or memories one page lists.")
