"""In-process MCP servers: an `mcp` 2.x `MCPServer` (or low-level `Server`) object served to claude over the
control channel, with no subprocess. claude sees it in its mcp-config as `{"type": "sdk"}` and sends each
JSON-RPC message as an `mcp_message` control request; the message goes to the server over the MCP SDK's
in-memory streams (a real server session: its handshake, tools, schemas, errors and structured output are
as over stdio), and the server's answer to that id goes back as the control response. A traced call carries
its span's context in `_meta`, as a subprocess server would have asked for it (see `frobozz.servers`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskStatus
from pydantic import ValidationError

from .. import _spans

log = logging.getLogger("frobozz.engine")
ANSWER_TIMEOUT = 300.0  # seconds a server may take over one request (a tool call)


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


class InProcessServers:
    """The servers of one claude process: `serve` (as a task) connects them, `handle` answers an mcp_message."""

    def __init__(
        self, servers: Mapping[str, Any], trace_parent: Callable[[str], Mapping[str, Any] | None] | None = None
    ) -> None:
        """`trace_parent`: the W3C context of the span for a tool_use id (when tracing is on)."""
        self.servers = dict(servers)
        self.trace_parent = trace_parent
        self._writers: dict[str, Any] = {}
        self._pending: dict[tuple[str, Any], tuple[anyio.Event, list[dict[str, Any]]]] = {}

    def config(self) -> dict[str, Any]:
        """What claude's --mcp-config says of them."""
        return {"mcpServers": {name: {"type": "sdk", "name": name} for name in self.servers}}

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect every server over in-memory streams and route their answers, until cancelled."""
        from mcp.client._memory import InMemoryTransport  # the MCP SDK's own in-process transport

        async with anyio.create_task_group() as tg, AsyncExitStack() as stack:
            for name, server in self.servers.items():
                read, write = await stack.enter_async_context(InMemoryTransport(server))
                self._writers[name] = write
                tg.start_soon(self._route, name, read)
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._writers.clear()
                for done, box in self._pending.values():
                    box.append(_error(None, -32603, "the in-process server stopped"))
                    done.set()

    async def _route(self, name: str, read: Any) -> None:
        async for item in read:
            if isinstance(item, Exception):
                log.warning("in-process MCP server %s: %s", name, item)
                continue
            message = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            waiting = self._pending.get((name, message.get("id")))
            if waiting is not None and ("result" in message or "error" in message):
                waiting[1].append(message)
                waiting[0].set()
            # the server's own notifications and requests have no way back to claude here: dropped

    async def handle(self, server_name: str, message: Mapping[str, Any]) -> dict[str, Any]:
        """claude's JSON-RPC `message` to `server_name`, and the server's answer (a JSON-RPC error for a bad one)."""
        from mcp import types
        from mcp.shared.message import SessionMessage

        ident = message.get("id") if isinstance(message, Mapping) else None
        write = self._writers.get(server_name)
        if write is None:
            return _error(ident, -32601, f"no in-process MCP server {server_name!r}")
        try:
            parsed = types.jsonrpc_message_adapter.validate_python(dict(message), by_name=False)
        except (ValidationError, TypeError, ValueError) as e:
            return _error(ident, -32600, f"not a JSON-RPC message: {str(e).splitlines()[0]}")
        self._carry_trace(parsed)
        if ident is None:  # a notification: no answer comes, but the control request wants one
            await write.send(SessionMessage(parsed))
            return {"jsonrpc": "2.0", "result": {}}
        key = (server_name, ident)
        if key in self._pending:
            return _error(ident, -32600, f"request id {ident!r} is already in flight")
        done = anyio.Event()
        box: list[dict[str, Any]] = []
        self._pending[key] = (done, box)
        try:
            await write.send(SessionMessage(parsed))
            with anyio.fail_after(ANSWER_TIMEOUT):
                await done.wait()
        except TimeoutError:
            return _error(ident, -32603, f"{server_name} did not answer within {ANSWER_TIMEOUT:g} s")
        finally:
            self._pending.pop(key, None)
        return box[0]

    def _carry_trace(self, parsed: Any) -> None:
        """A tools/call's `_meta` gets the context of the engine's span for its tool_use id: the server's own
        span (the MCP SDK's, from `_meta`) is then that span's child, as a subprocess server's is."""
        params = getattr(parsed, "params", None)
        if self.trace_parent is None or getattr(parsed, "method", None) != "tools/call" or not isinstance(params, dict):
            return
        meta = params.get("_meta")
        if not isinstance(meta, dict) or "traceparent" in meta or not isinstance(meta.get(_spans.TOOL_USE_META), str):
            return
        carrier = self.trace_parent(meta[_spans.TOOL_USE_META])
        if carrier:
            meta.update(carrier)
