"""A JSON-RPC request whose `id` is not a string or an integer (an object, a list, `true`, `null`, `1.5`) is
answered with an Invalid Request error, as JSON-RPC 2.0 says, in front of each server's HTTP endpoint.

The MCP SDK (2.3) takes such a message for a notification (its notification model lets an `id` through) and
answers 202 with no body, so the client waits for a response that never comes. Its own request ids are
`str | int`; this refuses in words what it would otherwise drop in silence. Pure ASGI: the body, read once,
is handed on unchanged."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

INVALID_REQUEST = -32600
MAX_BODY = 64 * 1024 * 1024  # bytes held to look at; a bigger body is passed on for the SDK to judge


def bad_id(message: Any) -> str | None:
    """Why this message's `id` cannot be answered, or None: only requests (a `method` and an `id`) are looked
    at; a response's or a notification's shape is the SDK's to judge."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    value = message["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    kind = "null" if value is None else type(value).__name__.replace("dict", "object").replace("list", "array")
    return f"Invalid Request: a request's id must be a string or an integer, not {kind}"


class RequestIds:
    """Refuses a POSTed request with an id that cannot be answered (400, a JSON-RPC error with `id: null`);
    passes everything else on, its body replayed as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= MAX_BODY:
            message = await receive()
            if message["type"] != "http.request":  # (the client left: the app sees that at once)
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
        body = b"".join(chunks)
        why = None
        if not more:
            try:
                why = bad_id(json.loads(body))
            except ValueError:
                why = None  # (not JSON: the SDK's parse error says so)
        if why is None:
            await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": more}], receive), send)
            return
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": why}}
        await JSONResponse(error, status_code=400)(scope, receive, send)


def _replay(first: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives back what was read first, then goes on with the real one."""
    pending = list(first)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
