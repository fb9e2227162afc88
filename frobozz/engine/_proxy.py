"""The engine's HTTP channel: a private proxy on 127.0.0.1 in front of the Anthropic API.

claude reaches the API through it (ANTHROPIC_BASE_URL). Responses stream through unchanged; on
the way the proxy reads token usage from `message_start`/`message_delta` (keeping a high-water
mark of context size), sniffs the `anthropic-ratelimit-unified-*` headers, and can rewrite
compaction requests. Each model request becomes a `Usage` event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import uvicorn
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .._loopback import listener
from ._events import Usage, text_of

log = logging.getLogger("frobozz.engine.proxy")
DEFAULT_UPSTREAM = "https://api.anthropic.com"
_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}
_COMPACTION_MARK = "Your task is to create a detailed summary of"

Rewrite = Callable[[dict[str, Any]], dict[str, Any]]
SUMMARY_FORM = "Answer in plain text: an <analysis> block, then the summary itself in a <summary> block."


def is_compaction_request(body: dict[str, Any]) -> bool:
    """claude's own compaction request: its last user message asks for a summary of the conversation."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return False
    return _COMPACTION_MARK in text_of(messages[-1].get("content"))


def _keep_summary_form(body: dict[str, Any]) -> dict[str, Any]:
    """A rewritten compaction still asks for the answer's form claude reads: its summary in a <summary>
    block (claude from 2.1.3xx asks the model again when there is none: a second, paid request)."""
    messages = body.get("messages") or []
    if messages and "<summary>" not in text_of(messages[-1].get("content")):
        content = messages[-1].get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        messages[-1]["content"] = [*blocks, {"type": "text", "text": SUMMARY_FORM}]
    return body


class _QuietServer(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # signals belong to whoever runs the engine, not to its proxy


class _UsageReader:
    """Reads usage out of an SSE stream (or a JSON body) as it passes, without holding it."""

    def __init__(self, streaming: bool) -> None:
        self.streaming = streaming
        self._pending = b""
        self._body = bytearray()
        self.model: str | None = None
        self.usage: dict[str, int] = {}

    def feed(self, chunk: bytes) -> None:
        if not self.streaming:
            if len(self._body) < 4 * 1024 * 1024:
                self._body += chunk
            return
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                self._event(line[5:])

    def finish(self) -> None:
        if not self.streaming and self._body:
            self._event(bytes(self._body))

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        message = event.get("message") if event.get("type") == "message_start" else event
        if isinstance(message, dict):
            self.model = message.get("model") or self.model
            for key, value in (message.get("usage") or {}).items():
                if isinstance(value, int):
                    self.usage[key] = value


class Proxy:
    def __init__(self, upstream: str | None, on_usage: Callable[[Usage], None]) -> None:
        self.upstream = (upstream or DEFAULT_UPSTREAM).rstrip("/")
        self.on_usage = on_usage
        self.rewrite: Rewrite | None = None
        self.is_compaction: Callable[[dict[str, Any]], bool] = is_compaction_request
        self.high_water = 0
        self.rate_limits: dict[str, str] = {}
        self.port = 0
        self._server: _QuietServer | None = None
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=30.0))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        sock = listener()  # with TCP_NODELAY: a streamed answer's chunks reach claude at once
        self.port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/{path:path}", self._forward,
                                      methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])])
        self._server = _QuietServer(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._server.serve, [sock])
            while not self._server.started:
                await anyio.sleep(0.002)
            task_status.started()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        await self._client.aclose()

    async def _forward(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        rewritten = False
        if self.rewrite is not None and path.endswith("/messages") and request.method == "POST":
            try:
                payload = json.loads(body)
                if self.is_compaction(payload):
                    body = json.dumps(_keep_summary_form(self.rewrite(payload))).encode()
                    rewritten = True
            except ValueError:
                pass
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["accept-encoding"] = "identity"  # so usage can be read as it passes
        url = f"{self.upstream}{path}" + (f"?{request.url.query}" if request.url.query else "")
        try:
            upstream = await self._client.send(
                self._client.build_request(request.method, url, headers=headers, content=body), stream=True)
        except httpx.HTTPError as e:
            log.warning("proxy: upstream %s failed: %s", self.upstream, e)
            message = json.dumps({"type": "error", "error": {"type": "api_error", "message": f"upstream: {e}"}})
            return Response(message, status_code=502, media_type="application/json")
        limits = {k: v for k, v in upstream.headers.items() if k.lower().startswith("anthropic-ratelimit-unified")}
        self.rate_limits.update(limits)
        counted = path.endswith("/messages") and request.method == "POST"
        reader = _UsageReader("text/event-stream" in upstream.headers.get("content-type", ""))
        response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
        return StreamingResponse(self._relay(upstream, reader, counted, path, limits, rewritten),
                                 status_code=upstream.status_code, headers=response_headers)

    async def _relay(self, upstream: httpx.Response, reader: _UsageReader, counted: bool, path: str,
                     limits: dict[str, str], rewritten: bool) -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                if counted:
                    reader.feed(chunk)
                yield chunk
        finally:
            await upstream.aclose()
            if counted:
                reader.finish()
                self._report(path, upstream.status_code, reader, limits, rewritten)

    def _report(self, path: str, status: int, reader: _UsageReader, limits: dict[str, str], rewritten: bool) -> None:
        u = reader.usage
        inputs = u.get("input_tokens", 0)
        created, read = u.get("cache_creation_input_tokens", 0), u.get("cache_read_input_tokens", 0)
        outputs = u.get("output_tokens", 0)
        context = inputs + created + read + outputs
        self.high_water = max(self.high_water, context)
        self.on_usage(Usage(path=path, status=status, model=reader.model, input_tokens=inputs, output_tokens=outputs,
                            cache_creation_input_tokens=created, cache_read_input_tokens=read,
                            context_tokens=context, context_high_water=self.high_water,
                            rate_limits=dict(limits), rewritten=rewritten))
