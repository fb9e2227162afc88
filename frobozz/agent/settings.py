"""The agent service's settings, from FROBOZZ_AGENT_* (and the command line of `frobozz serve agent`)."""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_AGENT_")

    workspaces: Path | None = None  # ROOT: a workspace is ROOT/<user>/<name>
    platform_dir: Path | None = None  # MCP servers and skills every workspace gets
    idle_timeout: float = 600.0  # seconds a session's claude may idle before it is released
    max_live: int = 8  # claude processes at once; the least recently used idle one goes first
    warm_spare: bool = True  # keep the next claude started ahead of need (counted under max_live; let go first)
    question_timeout: float = 600.0  # seconds a question waits for an answer
    attach_inline_chars: int = 8_000  # an attached document up to this size goes into the context
    claude_model: str | None = None
    first_uid: int = 2_000_000  # run as root: a new user's claude gets the first free uid from here up
