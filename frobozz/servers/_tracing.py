"""Every Frobozz server's side of a tool call as a child of the caller's span.

The MCP SDK makes each call's server span itself (OpenTelemetry's MCP conventions: `tools/call {tool}`,
`mcp.method.name`, kind server), under the trace context the MCP ecosystem carries as W3C `traceparent`
in the request's `_meta`. claude's own MCP client does not put Frobozz's context there, but it does put the call's
tool_use id (`claudecode/toolUseId`); a server started by a Frobozz engine then asks that engine (at
`FROBOZZ_TRACE_PARENTS`, inherited through claude) for the context of the span it opened for that id.
With tracing off, a call costs one check.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import httpx

from frobozz._tls import tls_context

from .. import _spans as S

log = logging.getLogger("frobozz.servers.tracing")
_ASK_TIMEOUT = 5.0  # seconds: the engine answers from memory, on loopback (a loaded machine is slow)


async def carrier_of(meta: Mapping[str, Any], relay: str | None = None) -> dict[str, str] | None:
    """The W3C context of the engine's span for this call, asked of the engine by tool_use id."""
    relay = relay if relay is not None else os.environ.get(S.TRACE_PARENTS_ENV)
    tool_use_id = meta.get(S.TOOL_USE_META)
    if not relay or not isinstance(tool_use_id, str) or not tool_use_id.replace("_", "").isalnum():
        return None
    try:
        async with httpx.AsyncClient(timeout=_ASK_TIMEOUT, verify=tls_context()) as client:
            answer = await client.get(f"{relay}/{tool_use_id}")
    except httpx.HTTPError as e:
        log.debug("no trace context for %s: %s", tool_use_id, e)
        return None
    if answer.status_code != 200:
        return None
    try:
        carrier = answer.json()
    except ValueError:
        return None
    if not isinstance(carrier, dict) or not isinstance(carrier.get("traceparent"), str):
        return None
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate", "baggage") and isinstance(v, str)}


class TraceParents:
    """Middleware ahead of the MCP SDK's own OpenTelemetry middleware (which makes the `tools/call {tool}`
    server span of the MCP conventions from `_meta`'s traceparent): a call that came without one, but
    with claude's tool_use id, gets the context of the engine's span for it, so the server's span and
    everything under it (a cortex search's embedding, SQL and scoring) is a child of the model's tool call."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call" and S.recording():
            meta = dict(ctx.meta or {})
            if "traceparent" not in meta:
                carrier = await carrier_of(meta)
                if carrier:
                    ctx.meta = {**meta, **carrier}
        return await call_next(ctx)


def traced(server: Any) -> Any:
    """`server` (an MCPServer) with its tool calls under the engine's spans when tracing is on."""
    server.middleware.insert(0, TraceParents())
    return server
