"""Whether the configured OTLP endpoint takes spans: an empty export request (valid OTLP: no spans), as
`frobozz doctor` asks it."""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

from frobozz._tls import tls_context

from ._setup import _shown, check_headers, check_protocol, traces_endpoint


def endpoint_set(environ: Mapping[str, str] | None = None) -> bool:
    """Whether an OTLP endpoint is configured in the environment."""
    environ = os.environ if environ is None else environ
    return any(
        environ.get(k, "").strip() for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


async def probe(environ: Mapping[str, str] | None = None, *, timeout: float = 5.0) -> str:  # noqa: ASYNC109 - httpx's own, per request
    """What the endpoint said, in a line; TracingConfigError when the settings are unusable, and
    ConnectionError when it cannot be reached or refuses OTLP (the message says which)."""
    environ = os.environ if environ is None else environ
    check_protocol(environ)
    headers = check_headers(environ)
    url = traces_endpoint(environ)
    try:
        async with httpx.AsyncClient(timeout=timeout, verify=tls_context()) as client:
            answer = await client.post(url, content=b"", headers={**headers, "Content-Type": "application/x-protobuf"})
    except httpx.HTTPError as e:
        raise ConnectionError(f"{_shown(url)} cannot be reached: {type(e).__name__}: {e}") from e
    if answer.status_code in (401, 403):
        raise ConnectionError(
            f"{_shown(url)} refused the credentials (HTTP {answer.status_code}): check OTEL_EXPORTER_OTLP_HEADERS"
        )
    if not answer.is_success:
        raise ConnectionError(
            f"{_shown(url)} answered HTTP {answer.status_code} to an OTLP export: is it the "
            f"backend's OTLP/HTTP endpoint (often port 4318, or a path ending in /v1/traces)?"
        )
    return f"{_shown(url)} takes OTLP spans (HTTP {answer.status_code})"
