"""The engine's HTTP channel: a private proxy on 127.0.0.1 in front of the Anthropic API.

claude reaches the API through it (ANTHROPIC_BASE_URL). Responses stream through unchanged; on
the way the proxy reads token usage from `message_start`/`message_delta` (keeping a high-water
mark of context size), sniffs the `anthropic-ratelimit-unified-*` headers, and can rewrite
compaction requests. Each model request becomes a `Usage` event. While `rehearsing` (a warm spare's
rehearsal of a first turn), the proxy answers model requests itself and sends nothing upstream.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import orjson
import uvicorn
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import _spans as S
from .._loopback import listener
from .._tls import tls_context
from ._events import Usage, text_of
from ._tracing import EngineTrace, request_cost

log = logging.getLogger("frobozz.engine.proxy")
DEFAULT_UPSTREAM = "https://api.anthropic.com"
_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}
_COMPACTION_MARK = "Your task is to create a detailed summary of"
TRACE_PARENTS_PATH = "/.frobozz/trace-parents"  # never an API path: the proxy answers it itself

Rewrite = Callable[[dict[str, Any]], dict[str, Any]]
SUMMARY_FORM = "Answer in plain text: an <analysis> block, then the summary itself in a <summary> block."
REHEARSAL_ANSWER = "."  # what a rehearsal's model request is answered, by the proxy itself


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

    def __init__(
        self, streaming: bool, on_tool_use: Callable[[str, str], None] | None = None, keep_text: bool = False
    ) -> None:
        self.streaming = streaming
        self._pending = b""
        self._body = bytearray()
        self.model: str | None = None
        self.usage: dict[str, int] = {}
        self.message_id: str | None = None
        self.stop_reason: str | None = None
        self.first_chunk: float | None = None  # monotonic time of the answer's first bytes
        self.on_tool_use = on_tool_use  # (id, name) as soon as a tool_use block begins
        self.text: list[str] | None = [] if keep_text else None  # only with content capture on

    def feed(self, chunk: bytes) -> None:
        if self.first_chunk is None:
            self.first_chunk = time.monotonic()
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
            if isinstance(message.get("id"), str) and message.get("type") == "message":
                self.message_id = message["id"]
            delta = message.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            self.stop_reason = message.get("stop_reason") or delta.get("stop_reason") or self.stop_reason
            self._blocks(event)

    def _blocks(self, event: dict[str, Any]) -> None:
        """Tool uses as they begin (a JSON answer's all at once); text only when content is captured."""
        kind = event.get("type")
        blocks = (
            [event.get("content_block")]
            if kind == "content_block_start"
            else event.get("content")
            if kind == "message"
            else ()
        )
        for block in blocks or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and self.on_tool_use is not None:
                self.on_tool_use(str(block.get("id") or ""), str(block.get("name") or ""))
            elif block.get("type") == "text" and self.text is not None:
                self.text.append(str(block.get("text") or ""))
        if kind == "content_block_delta" and self.text is not None:
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                self.text.append(str(delta.get("text") or ""))


_HEAD = re.compile(rb'\{"model":"([^"\\]{1,200})"')
_MAX_TOKENS = re.compile(rb'"max_tokens":(\d{1,9})[,}]')


def request_head(body: bytes) -> dict[str, Any] | None:
    """The request's model and max_tokens without reading its whole history (which grows with every turn), for
    a body in claude's own order: the model first, max_tokens after the messages, system and tools (so its last
    occurrence is the request's own). None for any other shape: the caller reads it all."""
    head = _HEAD.match(body)
    if head is None:
        return None
    found: dict[str, Any] = {"model": head.group(1).decode()}
    at = body.rfind(b'"max_tokens":')
    tokens = _MAX_TOKENS.match(body, at) if at >= 0 else None
    if tokens is not None:
        found["max_tokens"] = int(tokens.group(1))
    return found


def _answered_here(body: bytes) -> Response:
    """A rehearsal's model request, answered by the proxy as the Messages API would (streamed when asked), with
    no tokens used: nothing is sent upstream, no usage is reported, and claude counts no cost."""
    try:
        request = orjson.loads(body)
    except ValueError:
        request = None
    request = request if isinstance(request, dict) else {}
    message: dict[str, Any] = {
        "id": "msg_rehearsal",
        "type": "message",
        "role": "assistant",
        "model": str(request.get("model") or "rehearsal"),
        "content": [{"type": "text", "text": REHEARSAL_ANSWER}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    if not request.get("stream"):
        return Response(json.dumps(message), media_type="application/json")
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": REHEARSAL_ANSWER}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 0},
        },
        {"type": "message_stop"},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Response(stream, media_type="text/event-stream")


def upstream_reason(error: BaseException) -> str:
    """Why a request to the upstream failed, never empty: httpx's own words when it has some, always with the
    error's kind, and the kinds (and words) of what caused it. A connection reset or closed under a request is an
    httpx ReadError or WriteError whose str() is '' (anyio's BrokenResourceError, ClosedResourceError carry
    none): 'ReadError (from BrokenResourceError, from ConnectionResetError: [Errno 104] Connection reset by peer)'."""
    said = str(error).strip()
    kinds = [type(error).__name__]
    causes: list[str] = []
    seen = {id(error)}
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen and len(causes) < 4:
        seen.add(id(cause))
        words = str(cause).strip()
        if type(cause).__name__ not in kinds or (words and words != said):  # (httpx's ReadError wraps httpcore's)
            kinds.append(type(cause).__name__)
            causes.append(type(cause).__name__ + (f": {words}" if words and words != said else ""))
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, httpx.TimeoutException) and not said:
        said = "no answer in time"
    reason = type(error).__name__ + (f": {said}" if said else "")
    return reason + (f" (from {', from '.join(causes)})" if causes else "")


class Proxy:
    def __init__(
        self, upstream: str | None, on_usage: Callable[[Usage], None], trace: EngineTrace | None = None
    ) -> None:
        self.upstream = (upstream or DEFAULT_UPSTREAM).rstrip("/")
        self.on_usage = on_usage
        self.trace = trace or EngineTrace()
        self.rewrite: Rewrite | None = None
        self.is_compaction: Callable[[dict[str, Any]], bool] = is_compaction_request
        self.high_water = 0
        self.rate_limits: dict[str, str] = {}
        self.rehearsing = False  # model requests answered here, none sent upstream (`Engine.rehearse`)
        self.port = 0
        self._server: _QuietServer | None = None
        self._closing = False
        self._forwards: set[anyio.CancelScope] = set()  # requests waiting for the upstream's answer
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=30.0), verify=tls_context())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        sock = listener()  # with TCP_NODELAY: a streamed answer's chunks reach claude at once
        self.port = sock.getsockname()[1]
        app = Starlette(
            routes=[
                Route(TRACE_PARENTS_PATH + "/{tool_use_id}", self._traceparent, methods=["GET"]),
                Route(
                    "/{path:path}", self._forward, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
                ),
            ]
        )
        self._server = _QuietServer(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._server.serve, [sock])
            while not self._server.started:  # noqa: ASYNC110 - uvicorn's Server offers a flag, not an event
                await anyio.sleep(0.002)
            task_status.started()

    async def aclose(self) -> None:
        """Stop serving; a request still waiting for the upstream's answer is nobody's now (its claude has gone):
        it is cancelled first, not cut by the client's close, which it took for the upstream failing."""
        self._closing = True
        if self._server is not None:
            self._server.should_exit = True
        for scope in list(self._forwards):
            scope.cancel()
        await self._client.aclose()

    @property
    def trace_parents_url(self) -> str:
        """Where a Frobozz MCP server asks for its call's trace context, by tool_use id (see servers)."""
        return f"{self.url}{TRACE_PARENTS_PATH}"

    async def _traceparent(self, request: Request) -> Response:
        carrier = self.trace.traceparent(request.path_params["tool_use_id"])
        return Response(json.dumps(carrier or {}), status_code=200 if carrier else 404, media_type="application/json")

    async def _forward(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        rewritten = False
        counted = path.endswith("/messages") and request.method == "POST"
        if counted and self.rehearsing:
            return _answered_here(body)
        payload: dict[str, Any] | None = None
        if counted and self.rewrite is None and self.trace.on and self.trace.content is None:
            payload = request_head(body)  # a span with no content needs the model and max_tokens only
        if counted and payload is None and (self.rewrite is not None or self.trace.on):
            try:
                payload = orjson.loads(body)  # the whole history, every request: orjson reads it several times faster
            except ValueError:
                payload = None
        if self.rewrite is not None and counted and isinstance(payload, dict) and self.is_compaction(payload):
            body = json.dumps(_keep_summary_form(self.rewrite(payload))).encode()
            rewritten = True
        span = (
            self.trace.model_request(payload if isinstance(payload, dict) else None, request.headers)
            if counted
            else None
        )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["accept-encoding"] = "identity"  # so usage can be read as it passes
        url = f"{self.upstream}{path}" + (f"?{request.url.query}" if request.url.query else "")
        outgoing = self._client.build_request(request.method, url, headers=headers, content=body)
        try:
            upstream = await self._send(request, outgoing)
        except httpx.HTTPError as e:
            if span is not None:
                S.record_error(span, e)
                span.end()
            reason = upstream_reason(e)
            if self._closing:  # cut by the proxy's own close (a claude stopped mid-request): no upstream failure
                log.debug("proxy: %s %s given up as the proxy closed (%s)", request.method, path, reason)
                return Response(status_code=499)
            log.warning("proxy: upstream %s failed (%s %s): %s", self.upstream, request.method, path, reason)
            message = json.dumps({"type": "error", "error": {"type": "api_error", "message": f"upstream: {reason}"}})
            return Response(message, status_code=502, media_type="application/json")
        if upstream is None:  # claude went away (stopped, or gave the request up) before the answer came
            log.debug("proxy: %s %s given up: its client went away (or the proxy closed) first", request.method, path)
            if span is not None:
                S.record_error(span, "the client went away before the answer")
                span.end()
            return Response(status_code=499)
        limits = {k: v for k, v in upstream.headers.items() if k.lower().startswith("anthropic-ratelimit-unified")}
        self.rate_limits.update(limits)
        reader = _UsageReader(
            "text/event-stream" in upstream.headers.get("content-type", ""),
            on_tool_use=self.trace.tool_started if span is not None else None,
            keep_text=span is not None and self.trace.content is not None,
        )
        response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
        return StreamingResponse(
            self._relay(upstream, reader, counted, path, limits, rewritten, span),
            status_code=upstream.status_code,
            headers=response_headers,
        )

    async def _send(self, request: Request, outgoing: httpx.Request) -> httpx.Response | None:
        """The upstream's answer (its head: the body streams after), or None when claude went away before it (a
        claude stopped mid-request, as a sidecar's question given up at a session's close) or the proxy closed.
        Such a request is cancelled then: it waited on for an answer nobody would read, until the engine's close
        closed the client under it, and was logged as the upstream failing (a ReadError, whose str() is '')."""
        if self._closing:
            return None
        answer: httpx.Response | None = None
        failure: Exception | None = None
        with anyio.CancelScope() as scope:
            self._forwards.add(scope)
            try:
                async with anyio.create_task_group() as tg:

                    async def send() -> None:
                        nonlocal answer, failure
                        try:
                            answer = await self._client.send(outgoing, stream=True)
                        except Exception as e:  # noqa: BLE001 - raised below as it is, not in an exception group
                            failure = e
                        tg.cancel_scope.cancel()

                    async def until_gone() -> None:
                        if (await request.receive())["type"] == "http.disconnect":  # (the body is read: its end next)
                            scope.cancel()

                    tg.start_soon(send)
                    tg.start_soon(until_gone)
            finally:
                self._forwards.discard(scope)
        if failure is not None:
            raise failure
        if scope.cancel_called and answer is not None:  # (answered as claude went: nobody reads it)
            await answer.aclose()
            return None
        return answer

    async def _relay(
        self,
        upstream: httpx.Response,
        reader: _UsageReader,
        counted: bool,
        path: str,
        limits: dict[str, str],
        rewritten: bool,
        span: S.Span | None = None,
    ) -> AsyncIterator[bytes]:
        started = time.monotonic()
        error: BaseException | None = None
        try:
            async for chunk in upstream.aiter_raw():
                if counted:
                    reader.feed(chunk)
                yield chunk
        except BaseException as e:
            error = e
            raise
        finally:
            await upstream.aclose()
            if counted:
                reader.finish()
                self._report(path, upstream.status_code, reader, limits, rewritten)
                if span is not None:
                    self._end_span(span, upstream.status_code, reader, limits, rewritten, started, error)

    def _end_span(
        self,
        span: S.Span,
        status: int,
        reader: _UsageReader,
        limits: dict[str, str],
        rewritten: bool,
        started: float,
        error: BaseException | None,
    ) -> None:
        """The model request's span: the GenAI conventions' facts, and Frobozz's (first token, retries, limits)."""
        u = reader.usage
        attributes: dict[str, Any] = {
            S.HTTP_STATUS: status,
            S.GEN_AI_INPUT_TOKENS: u.get("input_tokens", 0),
            S.GEN_AI_OUTPUT_TOKENS: u.get("output_tokens", 0),
            S.GEN_AI_CACHE_CREATION_TOKENS: u.get("cache_creation_input_tokens", 0),
            S.GEN_AI_CACHE_READ_TOKENS: u.get("cache_read_input_tokens", 0),
            S.CONTEXT_TOKENS: self.high_water,
        }
        if reader.model:
            attributes[S.GEN_AI_RESPONSE_MODEL] = reader.model
        cost = request_cost(reader.model, u) if status < 400 else None
        if cost is not None:
            attributes[S.GEN_AI_COST] = cost
        if reader.message_id:
            attributes[S.GEN_AI_RESPONSE_ID] = reader.message_id
        if reader.stop_reason:
            attributes[S.GEN_AI_FINISH_REASONS] = [reader.stop_reason]
        if reader.first_chunk is not None:
            attributes[S.TIME_TO_FIRST_TOKEN_MS] = round((reader.first_chunk - started) * 1000, 1)
        if rewritten:
            attributes[S.MODEL_REWRITTEN] = True
        for key, value in limits.items():
            attributes[S.RATE_LIMIT_PREFIX + key.lower().removeprefix("anthropic-ratelimit-")] = value
        if reader.text is not None:
            attributes[S.GEN_AI_OUTPUT_MESSAGES] = S.cut("".join(reader.text), self.trace.content or 0)
        span.set_attributes(attributes)
        if error is not None and not isinstance(error, GeneratorExit):
            S.record_error(span, error)
        elif status >= 400:
            S.record_error(span, f"the API answered {status}")
        span.end()

    def _report(self, path: str, status: int, reader: _UsageReader, limits: dict[str, str], rewritten: bool) -> None:
        u = reader.usage
        inputs = u.get("input_tokens", 0)
        created, read = u.get("cache_creation_input_tokens", 0), u.get("cache_read_input_tokens", 0)
        outputs = u.get("output_tokens", 0)
        context = inputs + created + read + outputs
        self.high_water = max(self.high_water, context)
        self.on_usage(
            Usage(
                path=path,
                status=status,
                model=reader.model,
                input_tokens=inputs,
                output_tokens=outputs,
                cache_creation_input_tokens=created,
                cache_read_input_tokens=read,
                context_tokens=context,
                context_high_water=self.high_water,
                rate_limits=dict(limits),
                rewritten=rewritten,
            )
        )
