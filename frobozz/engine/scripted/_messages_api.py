"""A scripted Anthropic Messages API server on 127.0.0.1: the real claude CLI talks to it offline.

Point the CLI at `server.url` with ANTHROPIC_BASE_URL and it runs fully offline: every model
request reaches `handler(request)`, whose reply is streamed back exactly as the Messages API
streams (SSE: message_start, content blocks with deltas, message_delta, message_stop). Replies can
be text, thinking, tool calls, API errors (429/500/529), slow streams and dropped connections.
Product code, not only a test double: offline demos and the walkthrough player run on it.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..._loopback import listener
from .._proxy import is_compaction_request

STARTING = 30.0  # seconds the server's thread has to start listening


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Thinking:
    thinking: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"toolu_{secrets.token_hex(12)}")


Block = Text | Thinking | ToolUse


@dataclass(frozen=True)
class Reply:
    """One assistant message. `delay` paces every SSE event; `drop_after` cuts the stream after N events."""

    blocks: tuple[Block, ...]
    delay: float = 0.0
    drop_after: int | None = None
    input_tokens: int = 100
    output_tokens: int = 20
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


@dataclass(frozen=True)
class ApiError:
    status: int = 500
    type: str = "api_error"
    message: str = "scripted failure"


_ADDED_BY_THE_CLI = ("<system-reminder>", "<local-command-caveat>", "<command-name>", "<local-command-stdout>")


@dataclass(frozen=True)
class MessagesRequest:
    """One request as the CLI sent it, with the parts a script usually looks at."""

    body: dict[str, Any]
    path: str
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body.get("messages", [])
        return messages

    @property
    def tools(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools", [])]

    @property
    def system(self) -> str:
        system = self.body.get("system", "")
        return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system)

    def last_user_blocks(self) -> list[dict[str, Any]]:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        return []

    def last_user_text(self) -> str:
        """The text of the last user message (what the CLI adds, system reminders and the trace of a local
        command such as `/clear`, is left out)."""
        texts = [b.get("text", "") for b in self.last_user_blocks() if b.get("type") == "text"]
        return "\n".join(t for t in texts if not t.lstrip().startswith(_ADDED_BY_THE_CLI))

    def tool_results(self) -> list[dict[str, Any]]:
        return [b for b in self.last_user_blocks() if b.get("type") == "tool_result"]


Handler = Callable[[MessagesRequest], "Reply | ApiError | str | Iterable[Block]"]


def replies(*script: Reply | ApiError | str) -> Handler:
    """A handler that answers the main conversation's requests with `script`, one after another."""
    queue = list(script)

    def handler(_: MessagesRequest) -> Reply | ApiError | str:
        if not queue:
            return ApiError(500, "api_error", "the script has no more replies")
        return queue.pop(0)

    return handler


def _as_reply(answer: Reply | ApiError | str | Iterable[Block]) -> Reply | ApiError:
    if isinstance(answer, (Reply, ApiError)):
        return answer
    if isinstance(answer, str):
        return Reply((Text(answer),))
    return Reply(tuple(answer))


def _as_summary(answer: Reply | ApiError) -> Reply | ApiError:
    """A compaction answered as claude's compaction prompt asks a model to: the text in a <summary> block
    (claude from 2.1.3xx asks again when the block is missing, as it would of a real model's answer)."""
    if isinstance(answer, ApiError) or any(isinstance(b, Text) and "<summary>" in b.text for b in answer.blocks):
        return answer
    text = "\n".join(b.text for b in answer.blocks if isinstance(b, Text))
    return replace(answer, blocks=(Text(f"<summary>\n{text}\n</summary>"),))


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _stream_events(reply: Reply, model: str) -> Iterator[dict[str, Any]]:
    usage = {
        "input_tokens": reply.input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    yield {
        "type": "message_start",
        "message": {
            "id": f"msg_{secrets.token_hex(12)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }
    for index, block in enumerate(reply.blocks):
        if isinstance(block, Text):
            yield {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            for piece in _pieces(block.text):
                yield {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
        elif isinstance(block, Thinking):
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "thinking_delta", "thinking": block.thinking},
            }
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": "c2NyaXB0ZWQ="},
            }
        else:
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": block.id, "name": block.name, "input": {}},
            }
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block.input)},
            }
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": reply.output_tokens},
    }
    yield {"type": "message_stop"}


def _pieces(text: str, size: int = 40) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _message_json(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if isinstance(block, Text):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, Thinking):
            content.append({"type": "thinking", "thinking": block.thinking, "signature": "c2NyaXB0ZWQ="})
        else:
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
    return {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


class ScriptedModel:
    """The server. Use as a context manager (sync or async); `url` is its base address."""

    def __init__(self, handler: Handler, *, side_reply: str = "ok") -> None:
        self.handler = handler
        self.side_reply = side_reply
        self.requests: list[MessagesRequest] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What a claude process needs in its environment to talk to this server."""
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-scripted",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    # -- HTTP ------------------------------------------------------------------------------------
    async def _messages(self, request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())  # the whole history, every request: orjson reads it faster
        except ValueError:
            return JSONResponse(
                {"type": "error", "error": {"type": "invalid_request_error", "message": "body is not JSON"}},
                status_code=400,
            )
        seen = MessagesRequest(body=body, path=request.url.path, headers=dict(request.headers))
        with self._lock:
            self.requests.append(seen)
        model = body.get("model", "scripted-model")
        if not body.get("tools") and not body.get("stream"):
            answer: Reply | ApiError = Reply((Text(self.side_reply),))  # side calls: titles, quotas
        else:
            answer = _as_reply(await anyio.to_thread.run_sync(self.handler, seen))
            if is_compaction_request(body):
                answer = _as_summary(answer)
        if isinstance(answer, ApiError):
            return JSONResponse(
                {"type": "error", "error": {"type": answer.type, "message": answer.message}}, status_code=answer.status
            )
        if not body.get("stream"):
            return JSONResponse(_message_json(answer, model), headers=dict(answer.headers))
        return StreamingResponse(
            self._stream(answer, model), media_type="text/event-stream", headers=dict(answer.headers)
        )

    async def _stream(self, reply: Reply, model: str) -> AsyncIterator[bytes]:
        for n, event in enumerate(_stream_events(reply, model)):
            if reply.drop_after is not None and n >= reply.drop_after:
                raise ConnectionResetError("scripted drop")  # uvicorn closes the connection mid-stream
            if reply.delay:
                await anyio.sleep(reply.delay)
            yield _sse(event)

    async def _count_tokens(self, request: Request) -> Response:
        body = await request.json()
        return JSONResponse({"input_tokens": max(1, len(json.dumps(body.get("messages", []))) // 4)})

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            ]
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> ScriptedModel:
        sock = listener()
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTING
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the scripted Messages API server did not start")
            threading.Event().wait(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            assert self._thread is not None
            self._thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedModel:
        return await anyio.to_thread.run_sync(self.start)  # its wait for the server's thread stalls no task

    async def __aexit__(self, *exc: object) -> None:
        await anyio.to_thread.run_sync(self.stop)
