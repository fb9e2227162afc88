"""Engine settings from FROBOZZ_* environment variables: where claude is, and the engine's limits."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    claude_path: Path | None = Field(default=None, description="The claude executable to run.")
    max_line_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, description="Longest stdout line kept.")
    stderr_tail_bytes: int = Field(default=64 * 1024, ge=1024, description="stderr kept for error reports.")
    control_timeout: float = Field(default=60.0, gt=0, description="Seconds a control request may take.")
    close_timeout: float = Field(default=10.0, gt=0, description="Seconds to wait for claude to exit.")
    rehearse_first_turn: bool = Field(
        default=True,
        description=(
            "A warm spare rehearses a session's first turn, its model request answered by the engine's proxy "
            "(nothing reaches the API), so a warm session's first answer comes sooner; not when claude's settings "
            "files or plugins have hooks, which would see that turn."
        ),
    )
    trace_content: bool = Field(
        default=False,
        validation_alias=AliasChoices(
            "trace_content", "FROBOZZ_TRACE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
        ),
        description=(
            "With tracing on, spans carry prompt and completion text (off by default, as the GenAI conventions say)."
        ),
    )
    trace_content_max: int = Field(
        default=4000,
        ge=0,
        le=1_000_000,
        description=("With content capture on: the characters of text one span attribute may carry, the rest cut."),
    )
