"""Tracing's errors: one root; each message says what is wrong and what to do."""


class TracingError(Exception):
    """Root of every error the tracing set-up raises on purpose."""


class TracingConfigError(TracingError):
    """An OTEL_* setting cannot be used (a malformed header list, an unsupported protocol); nothing started."""
