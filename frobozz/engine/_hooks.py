"""Hooks: async Python callables claude calls at points of its loop (before and after a tool, when the
user's prompt is submitted, when it stops, before a compaction, when a session starts), registered at
`initialize` and answered on `hook_callback` control requests. Wire shapes follow the official
claude-agent-sdk (`_internal/query.py`, `types.py`).

A hook that raises or runs past its timeout is answered for it, with a logged error: a PreToolUse hook
denies the tool (a guard that fails must not let the tool through), any other carries on with a system
message saying what failed. The turn never hangs on a hook."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

log = logging.getLogger("frobozz.engine")

HookEvent = Literal[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionStart",
    "SessionEnd",
    "Notification",
]
CLI_MARGIN = 5.0  # seconds claude's own timeout for a hook is longer than ours, so ours answers first


@dataclass(frozen=True)
class HookInput:
    """What claude says about the moment: the event, and its fields (`raw` has them all)."""

    event: str
    session_id: str | None = None
    tool_name: str | None = None  # PreToolUse, PostToolUse
    tool_input: Mapping[str, Any] | None = None
    tool_use_id: str | None = None
    tool_response: Any = None  # PostToolUse
    prompt: str | None = None  # UserPromptSubmit
    trigger: str | None = None  # PreCompact: "manual" or "auto"; SessionStart: its source
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, data: Mapping[str, Any], tool_use_id: str | None) -> HookInput:
        return cls(
            event=str(data.get("hook_event_name", "")),
            session_id=data.get("session_id"),
            tool_name=data.get("tool_name"),
            tool_input=data.get("tool_input"),
            tool_use_id=tool_use_id or data.get("tool_use_id"),
            tool_response=data.get("tool_response"),
            prompt=data.get("prompt"),
            trigger=data.get("trigger") or data.get("source"),
            raw=data,
        )


@dataclass(frozen=True)
class HookOutput:
    """What a hook tells claude (a hook that returns None changes nothing)."""

    permission: Literal["allow", "deny", "ask"] | None = None  # PreToolUse: decide the tool call
    reason: str | None = None  # why: the model reads it (a denial, a block)
    updated_input: Mapping[str, Any] | None = None  # PreToolUse: the tool gets this input instead
    context: str | None = None  # added to what the model sees (UserPromptSubmit, SessionStart, Post/PreToolUse)
    block: bool = False  # UserPromptSubmit: drop the prompt; PostToolUse: tell the model; Stop: keep going
    stop: str | None = None  # end the turn now, with this reason
    system_message: str | None = None  # shown to the user, not the model

    def wire(self, event: str) -> dict[str, Any]:
        """The hook's JSON output as claude reads it."""
        out: dict[str, Any] = {}
        specific: dict[str, Any] = {}
        if self.permission is not None:
            specific["permissionDecision"] = self.permission
            if self.reason is not None:
                specific["permissionDecisionReason"] = self.reason
        if self.updated_input is not None:
            specific["updatedInput"] = dict(self.updated_input)
            specific.setdefault("permissionDecision", "allow")
        if self.context is not None:
            specific["additionalContext"] = self.context
        if specific:
            out["hookSpecificOutput"] = {"hookEventName": event, **specific}
        if self.block:
            out["decision"] = "block"
        if self.reason is not None and self.permission is None:
            out["reason"] = self.reason
        if self.stop is not None:
            out["continue"] = False
            out["stopReason"] = self.stop
        if self.system_message is not None:
            out["systemMessage"] = self.system_message
        return out


Hook = Callable[[HookInput], Awaitable[HookOutput | None]]


@dataclass(frozen=True)
class HookMatcher:
    """Hooks for one event: those whose `matcher` (a tool name, or names joined by '|'; None: every one)
    fits, each given at most `timeout` seconds."""

    hooks: Sequence[Hook]
    matcher: str | None = None
    timeout: float = 60.0


Hooks = Mapping[str, Sequence[HookMatcher]]  # event -> its matchers


class HookRegistry:
    """Numbers each hook for `initialize`, and answers claude's `hook_callback` requests with them."""

    def __init__(self, hooks: Hooks) -> None:
        self._callbacks: dict[str, tuple[Hook, float, str]] = {}
        self._config: dict[str, list[dict[str, Any]]] = {}
        for event, matchers in hooks.items():
            for matcher in matchers:
                ids = []
                for hook in matcher.hooks:
                    callback_id = f"hook_{len(self._callbacks)}"
                    self._callbacks[callback_id] = (hook, matcher.timeout, event)
                    ids.append(callback_id)
                self._config.setdefault(event, []).append(
                    {"matcher": matcher.matcher, "hookCallbackIds": ids, "timeout": matcher.timeout + CLI_MARGIN}
                )

    def config(self) -> dict[str, list[dict[str, Any]]] | None:
        """The `hooks` field of the initialize request (None: no hooks)."""
        return self._config or None

    async def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        callback_id = str(request.get("callback_id", ""))
        if callback_id not in self._callbacks:
            raise LookupError(f"no hook {callback_id!r} was registered")
        hook, timeout, event = self._callbacks[callback_id]
        data = request.get("input") or {}
        hook_input = HookInput.of(data, request.get("tool_use_id"))
        name = getattr(hook, "__name__", type(hook).__name__)
        try:
            with anyio.fail_after(timeout):
                output = await hook(hook_input)
            if output is not None and not isinstance(output, HookOutput):
                raise TypeError(f"it must return a HookOutput or None, not {type(output).__name__}")
        except Exception as e:  # noqa: BLE001 - whatever a hook does, claude gets an answer
            why = (
                f"timed out after {timeout:g} s" if isinstance(e, TimeoutError) else f"failed: {type(e).__name__}: {e}"
            )
            log.error("hook %s for %s %s", name, hook_input.event or event, why)
            if (hook_input.event or event) == "PreToolUse":
                return HookOutput(permission="deny", reason=f"the {name} hook {why}").wire("PreToolUse")
            return HookOutput(system_message=f"the {name} hook {why}").wire(hook_input.event or event)
        return {} if output is None else output.wire(hook_input.event or event)


class QuietHooks(HookRegistry):
    """Answers every hook callback with nothing and calls no hook: a warm spare's rehearsal is nobody's turn."""

    def __init__(self) -> None:
        super().__init__({})

    async def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return {}
