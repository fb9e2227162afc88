"""Tracing: the OpenTelemetry SDK and OTLP exporter configured at a process's start (the CLI's `--trace`).

The parts emit spans through the OpenTelemetry API only (`frobozz._spans` names them); this part is
the one that makes them go somewhere.
"""

from ._local import LocalSpans, prune, run_spans, session_spans
from ._probe import endpoint_set, probe
from ._setup import (
    DEFAULT_ENDPOINT,
    SessionOnEverySpan,
    Tracing,
    WarnOnce,
    check_headers,
    check_protocol,
    claude_telemetry,
    configure,
    current,
    traces_endpoint,
)
from .exceptions import TracingConfigError, TracingError
from .settings import TracingSettings

__all__ = [
    "DEFAULT_ENDPOINT",
    "LocalSpans",
    "SessionOnEverySpan",
    "Tracing",
    "TracingConfigError",
    "TracingError",
    "TracingSettings",
    "WarnOnce",
    "check_headers",
    "check_protocol",
    "claude_telemetry",
    "configure",
    "current",
    "endpoint_set",
    "probe",
    "prune",
    "run_spans",
    "session_spans",
    "traces_endpoint",
]
