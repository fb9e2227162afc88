"""Settings of the handoff server: the memory store's database and embedder, and the claude session it serves."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from ...memory import MemorySettings


class Settings(MemorySettings):
    model_config = SettingsConfigDict(
        env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore", populate_by_name=True
    )

    session_id: str | None = Field(
        default=None,
        validation_alias=AliasChoices("CLAUDE_CODE_SESSION_ID", "FROBOZZ_SESSION_ID"),
        description="The claude session writing letters; claude sets CLAUDE_CODE_SESSION_ID for its MCP servers.",
    )
    handoff_max_chars: int = Field(default=100_000, ge=1, description="The longest summary kept.")
