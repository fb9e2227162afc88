"""`--trace` for `play`, `chat`, `serve` and `worker`: the SDK and the OTLP exporter set up before the work."""

from __future__ import annotations

import typer
from rich.markup import escape

from ._output import err

TRACE_HELP = (
    "Send OpenTelemetry traces (turns, model requests, tools, memory) over OTLP to "
    "OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318); the standard OTEL_* variables apply."
)


def trace_option() -> bool:
    return typer.Option(False, "--trace", envvar="FROBOZZ_TRACE", help=TRACE_HELP)


async def _database() -> str:
    """Where spans are kept: the database Frobozz uses (FROBOZZ_DATABASE_URL, else the embedded Postgres,
    started if need be), found on the exporter's thread when the first spans are written."""
    from frobozz.memory import MemorySettings, database_url

    return await database_url(MemorySettings())


def start_tracing(on: bool, service: str) -> None:
    """Tracing on when asked; a setting it cannot use is a clear error before anything starts."""
    if not on:
        return
    from frobozz.tracing import TracingConfigError, TracingSettings, configure

    try:
        configure(service, TracingSettings(trace=True), database=_database)
    except TracingConfigError as e:
        err.print(f"[red]error:[/red] tracing: {escape(str(e))}")
        raise typer.Exit(2) from None
