"""The control protocol: our requests matched to the CLI's answers by request_id (with timeouts),
and the CLI's own requests (can_use_tool, hook_callback, mcp_message) answered by callbacks running as tasks,
never in the reader. Reply shapes follow the official claude-agent-sdk.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .. import _spans
from ._hooks import HookRegistry
from ._inprocess import InProcessServers
from ._tracing import EngineTrace
from .exceptions import ControlError, ControlTimeoutError, EngineError

log = logging.getLogger("frobozz.engine")


@dataclass(frozen=True)
class Allow:
    """Let the tool run, optionally with changed input or permission updates for the session."""

    updated_input: Mapping[str, Any] | None = None
    updated_permissions: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Deny:
    """Refuse the tool; the model reads `message`. `interrupt` also stops the turn."""

    message: str = "denied"
    interrupt: bool = False


@dataclass(frozen=True)
class PermissionContext:
    tool_use_id: str | None = None
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    description: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


PermissionCallback = Callable[[str, Mapping[str, Any], PermissionContext], Awaitable[Allow | Deny]]
Writer = Callable[[str], Awaitable[None]]


class ControlChannel:
    def __init__(
        self,
        write: Writer,
        *,
        can_use_tool: PermissionCallback | None,
        timeout: float,
        hooks: HookRegistry | None = None,
        servers: InProcessServers | None = None,
        trace: EngineTrace | None = None,
    ) -> None:
        self._trace = trace
        self._write = write
        self._can_use_tool = can_use_tool
        self._hooks = hooks
        self._servers = servers
        self.timeout = timeout
        self._pending: dict[str, tuple[anyio.Event, list[dict[str, Any] | Exception]]] = {}
        self.answered = False  # claude has granted a request (the first is `initialize`): it is up
        self._handlers: dict[str, anyio.CancelScope] = {}

    def rebind(self, *, can_use_tool: PermissionCallback | None, hooks: HookRegistry | None) -> None:
        """Answer claude's permission and hook requests with these from now on (a warm spare taken over)."""
        self._can_use_tool, self._hooks = can_use_tool, hooks

    async def request(
        self,
        subtype: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - withdrawn, and named in the error
        **fields: Any,
    ) -> dict[str, Any]:
        """Send a control request and wait for its answer (ControlError, ControlTimeoutError)."""
        request_id = f"req_{secrets.token_hex(8)}"
        done = anyio.Event()
        box: list[dict[str, Any] | Exception] = []
        self._pending[request_id] = (done, box)
        try:
            await self._write(
                json.dumps(
                    {"type": "control_request", "request_id": request_id, "request": {"subtype": subtype, **fields}}
                )
            )
            with anyio.fail_after(timeout or self.timeout):
                await done.wait()
        except TimeoutError:
            raise ControlTimeoutError(
                f"claude did not answer {subtype!r} within {timeout or self.timeout:g} s"
            ) from None
        finally:
            self._pending.pop(request_id, None)
        answer = box[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def on_response(self, message: Mapping[str, Any]) -> None:
        response = message.get("response")
        if not isinstance(response, Mapping):
            return  # not an answer to anything
        pending = self._pending.get(response.get("request_id", ""))
        if pending is None:
            return  # an answer to a request we gave up on
        done, box = pending
        if response.get("subtype") == "error":
            box.append(ControlError(f"claude refused the control request: {response.get('error')}"))
        else:
            box.append(response.get("response") or {})
            self.answered = True
        done.set()

    def on_request(self, message: Mapping[str, Any], task_group: TaskGroup) -> None:
        task_group.start_soon(self._answer, message)

    def on_cancel(self, message: Mapping[str, Any]) -> None:
        scope = self._handlers.get(message.get("request_id", ""))
        if scope is not None:
            scope.cancel()

    def fail_all(self, error: EngineError) -> None:
        """The process is gone: nobody will answer what is still pending."""
        for done, box in list(self._pending.values()):
            if not done.is_set():
                box.append(error)
                done.set()

    async def _answer(self, message: Mapping[str, Any]) -> None:
        request_id = message.get("request_id", "")
        request = message.get("request") or {}
        with anyio.CancelScope() as scope:
            self._handlers[request_id] = scope
            try:
                body = await self._traced(request)
                reply = {"subtype": "success", "request_id": request_id, "response": body}
            except Exception as e:  # noqa: BLE001 - an answer the CLI can act on, never a stuck turn
                log.warning("control request %s failed: %s", request.get("subtype"), e)
                reply = {"subtype": "error", "request_id": request_id, "error": str(e)}
            finally:
                self._handlers.pop(request_id, None)
            try:
                await self._write(json.dumps({"type": "control_response", "response": reply}))
            except EngineError:
                pass  # the process died while we were deciding

    async def _traced(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A permission question or a hook in a span (under its tool call's, when it has one): its length is
        the time the answer took (a person's, for a question)."""
        subtype = request.get("subtype")
        name = {"can_use_tool": _spans.PERMISSION, "hook_callback": _spans.HOOK}.get(str(subtype))
        if name is None or self._trace is None or not self._trace.on:
            return await self._handle(request)
        hook_input = request.get("input")
        if not isinstance(hook_input, Mapping):
            hook_input = {}
        tool_use_id = request.get("tool_use_id") or hook_input.get("tool_use_id")
        attributes: dict[str, Any] = {}
        if subtype == "can_use_tool":
            attributes[_spans.GEN_AI_TOOL_NAME] = str(request.get("tool_name", ""))
        elif isinstance(hook_input.get("hook_event_name"), str):
            attributes[_spans.HOOK_EVENT] = hook_input["hook_event_name"]
        with _spans.span(name, parent=self._trace.context_for(tool_use_id), attributes=attributes) as span:
            body = await self._handle(request)
            if subtype == "can_use_tool":
                span.set_attribute(_spans.PERMISSION_DECISION, str(body.get("behavior")))
            return body

    async def _handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        subtype = request.get("subtype")
        if subtype == "hook_callback":
            if self._hooks is None:
                raise ControlError("no hooks are registered")
            return await self._hooks.answer(request)
        if subtype == "mcp_message":
            if self._servers is None:
                raise ControlError("no in-process MCP servers are configured")
            return {
                "mcp_response": await self._servers.handle(
                    str(request.get("server_name")), request.get("message") or {}
                )
            }
        if subtype != "can_use_tool":
            raise ControlError(f"unsupported control request {subtype!r}")
        if self._can_use_tool is None:
            raise ControlError("no permission callback is configured")
        tool_input = request.get("input") or {}
        context = PermissionContext(
            tool_use_id=request.get("tool_use_id"),
            suggestions=list(request.get("permission_suggestions") or []),
            description=request.get("description"),
            raw=request,
        )
        decision = await self._can_use_tool(request.get("tool_name", ""), tool_input, context)
        if isinstance(decision, Allow):
            body: dict[str, Any] = {
                "behavior": "allow",
                "updatedInput": dict(decision.updated_input if decision.updated_input is not None else tool_input),
            }
            if decision.updated_permissions is not None:
                body["updatedPermissions"] = decision.updated_permissions
            return body
        if isinstance(decision, Deny):
            body = {"behavior": "deny", "message": decision.message}
            if decision.interrupt:
                body["interrupt"] = True
            return body
        raise TypeError(f"the permission callback must return Allow or Deny, not {type(decision).__name__}")
