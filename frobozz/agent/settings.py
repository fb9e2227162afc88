"""The agent service's settings, from FROBOZZ_AGENT_* (and the command line of `frobozz serve agent`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_AGENT_", env_ignore_empty=True)

    workspaces: Path | None = None  # ROOT: a workspace is ROOT/<user>/<name>
    platform_dir: Path | None = None  # MCP servers and skills every workspace gets
    idle_timeout: float = 600.0  # seconds a session's claude may idle before it is released
    shutdown_timeout: float = 60.0  # seconds the held sessions' claudes may take to close at shutdown (then stopped)
    max_live: int = 8  # claude processes at once; the least recently used idle one goes first
    warm_spare: bool = True  # keep the next claude started ahead of need (counted under max_live; let go first)
    question_timeout: float = 600.0  # seconds a question waits for an answer
    attach_inline_chars: int = 8_000  # an attached document up to this size goes into the context
    claude_model: str | None = None
    # seconds an instance holds a session without renewing (then another takes it over); renewed every third
    lease_ttl: float = Field(10.0, ge=1.0)
    first_uid: int = 2_000_000  # run as root: a new user's claude gets the first free uid from here up
    push_subject: str = "mailto:agent@frobozz.invalid"  # the VAPID `sub` claim: who a push service may contact
    webhook_retries: int = 5  # tries of one delivery (backoff doubling from webhook_backoff seconds)
    webhook_backoff: float = 1.0
    webhook_claim: float = 30.0  # seconds an instance holds a delivery it is making (then another may make it)
    webhook_poll: float = 2.0  # seconds between looks for deliveries due (queued elsewhere, retries, lapsed claims)
    webhook_pause_after: int = 3  # deliveries failed in a row before a webhook is paused
    webhook_keep: int = 1000  # deliveries kept waiting for a webhook (paused or slow): beyond, the oldest go, counted
    loopback_receivers: bool = False  # tests and local development: push endpoints and webhooks on 127.0.0.1
