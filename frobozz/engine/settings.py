"""Engine settings from FROBOZZ_* environment variables: where claude is, and the engine's limits."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_file=".env", extra="ignore")

    claude_path: Path | None = Field(default=None, description="The claude executable to run.")
    max_line_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, description="Longest stdout line kept.")
    stderr_tail_bytes: int = Field(default=64 * 1024, ge=1024, description="stderr kept for error reports.")
    control_timeout: float = Field(default=60.0, gt=0, description="Seconds a control request may take.")
    close_timeout: float = Field(default=10.0, gt=0, description="Seconds to wait for claude to exit.")
