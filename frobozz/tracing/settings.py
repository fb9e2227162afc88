"""Tracing settings from FROBOZZ_* environment variables; where spans go is OpenTelemetry's own OTEL_* set."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class TracingSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    trace: bool = Field(
        default=False, description=("Export spans over OTLP to OTEL_EXPORTER_OTLP_ENDPOINT (what `--trace` turns on).")
    )
    trace_claude: bool = Field(
        default=True,
        description=(
            "With tracing on, claude's own telemetry (its OTel metrics and events) goes to the same endpoint."
        ),
    )
    trace_warn_once: bool = Field(
        default=True,
        description=("An endpoint that is down or slow is said once (spans are dropped), not at every batch."),
    )
    trace_keep_days: float = Field(
        default=7.0,
        ge=0,
        le=3650,
        description=(
            "Days the spans are kept in Postgres too (FROBOZZ_DATABASE_URL's, else the embedded one), for the web "
            "view's waterfall; 0 keeps none."
        ),
    )
    database_url: SecretStr | None = Field(default=None, description="The Postgres the spans are kept in.")
