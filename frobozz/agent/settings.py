"""The agent service's settings, from FROBOZZ_AGENT_* (or a .env file) and the command line of `frobozz serve agent`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AgentSettings(BaseSettings):
    """Each field is FROBOZZ_AGENT_<NAME> in the environment (or a .env file in the current folder)."""

    model_config = SettingsConfigDict(
        env_prefix="FROBOZZ_AGENT_", env_ignore_empty=True, env_file=".env", extra="ignore"
    )

    workspaces: Path | None = None  # ROOT: a workspace is ROOT/<user>/<name>
    platform_dir: Path | None = None  # MCP servers and skills every workspace gets
    idle_timeout: float = Field(600.0, ge=0.1)  # seconds a session's claude may idle before it is released
    # seconds the held sessions' claudes may take to close at shutdown (then stopped)
    shutdown_timeout: float = Field(60.0, gt=0)
    max_live: int = Field(8, ge=1)  # claude processes at once; the least recently used idle one goes first
    warm_spare: bool = True  # keep the next claude started ahead of need (counted under max_live; let go first)
    question_timeout: float = Field(600.0, gt=0)  # seconds a question waits for an answer
    # an attached document up to this size goes into the context (0: none does, each is only named)
    attach_inline_chars: int = Field(8_000, ge=0)
    claude_model: str | None = None
    # seconds an instance holds a session without renewing (then another takes it over); renewed every third
    lease_ttl: float = Field(10.0, ge=1.0)
    # run as root: a new user's claude gets the first free uid from here up (never a system account's, nor root's)
    first_uid: int = Field(2_000_000, ge=1000, lt=2**32 - 1)
    push_subject: str = "mailto:agent@frobozz.invalid"  # the VAPID `sub` claim: who a push service may contact
    webhook_retries: int = Field(5, ge=1)  # tries of one delivery (backoff doubling from webhook_backoff seconds)
    webhook_backoff: float = Field(1.0, gt=0)
    # seconds an instance holds a delivery it is making (then another may make it)
    webhook_claim: float = Field(30.0, gt=0)
    # seconds between looks for deliveries due (queued elsewhere, retries, lapsed claims); each look is a query
    webhook_poll: float = Field(2.0, ge=0.1)
    webhook_pause_after: int = Field(3, ge=1)  # deliveries failed in a row before a webhook is paused
    # deliveries kept waiting for a webhook (paused or slow): beyond, the oldest go, counted
    webhook_keep: int = Field(1000, ge=1)
    loopback_receivers: bool = False  # tests and local development: push endpoints and webhooks on 127.0.0.1
