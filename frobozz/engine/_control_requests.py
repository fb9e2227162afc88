"""The control requests the engine passes through to claude as its own methods: the MCP servers' status (and a
wait until they have started), one server reconnected or turned off and on, files rewound to a message, the
context window's usage, a background task stopped, the model and the permission mode changed, and what claude
answered to `initialize`. Each asks the running claude over the control channel (`_control.py`) and reads its
answer; nothing here keeps state of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from ._control import ControlChannel
from ._events import ContextUsage, McpServerStatus
from ._options import EngineOptions
from .exceptions import McpServerError


class ControlRequests:
    """Engine's pass-through control requests (see the module). A base class of `Engine`, not a part it holds:
    these are the engine's own public methods (`engine.set_model(...)`), and each needs nothing of it but the
    control channel of its running claude (`_require_control`), its options and its `init_response`, so
    inheriting them is the simplest honest way to keep them Engine's while they live apart from its lifecycle."""

    options: EngineOptions
    init_response: dict[str, Any]

    def _require_control(self) -> ControlChannel:
        """The control channel of the running claude, or SessionClosedError: Engine's."""
        raise NotImplementedError

    async def mcp_status(self) -> tuple[McpServerStatus, ...]:
        """What claude says of each MCP server from the config, now."""
        answer = await self._require_control().request("mcp_status")
        return tuple(McpServerStatus.parse(s) for s in answer.get("mcpServers") or () if isinstance(s, Mapping))

    async def wait_for_mcp(
        self,
        names: Iterable[str] | None = None,
        *,
        timeout: float = 120,  # noqa: ASYNC109 - the error names the servers
        poll: float = 0.1,
    ) -> tuple[McpServerStatus, ...]:
        """Until claude has started the MCP servers (those named, or all): a turn that begins while a
        server is still "pending" runs without its tools. McpServerError names each one that failed,
        is missing from the config, or was still starting after `timeout` seconds. In-process servers are
        served as claude starts (its status answer leaves them out): there is nothing to wait for."""
        wanted = None if names is None else set(names) - set(self.options.in_process_servers)

        async def status() -> list[McpServerStatus]:
            return [s for s in await self.mcp_status() if wanted is None or s.name in wanted]

        servers = await status()
        with anyio.move_on_after(timeout):
            while any(s.status == "pending" for s in servers):  # claude has no event for this: ask again
                await anyio.sleep(poll)
                servers = await status()
        commands = self.options.server_commands()
        problems = [
            f"{s.name}: {s.status}"
            + (f" ({s.error})" if s.error else "")
            + (
                f" [command: {commands[s.name]}]"
                if s.name in commands and commands[s.name] not in (s.error or "")
                else ""
            )
            for s in servers
            if s.status != "connected"
        ]
        problems += [f"{name}: not in the MCP config" for name in sorted((wanted or set()) - {s.name for s in servers})]
        if problems:
            late = f" after {timeout:g} s" if any(s.status == "pending" for s in servers) else ""
            raise McpServerError(f"MCP servers not connected{late}: " + "; ".join(problems))
        return tuple(servers)

    async def rewind_files(self, user_message_id: str) -> None:
        """Put the files claude's tools changed back as they were at that user message (its `uuid`); needs
        `EngineOptions(file_checkpointing=True)`."""
        await self._require_control().request("rewind_files", user_message_id=user_message_id)

    async def get_context_usage(self) -> ContextUsage:
        """How full the context window is now, and with what."""
        return ContextUsage.parse(await self._require_control().request("get_context_usage"))

    async def reconnect_mcp_server(self, name: str) -> None:
        """Start an MCP server of the config again (after it failed or was turned off)."""
        await self._require_control().request("mcp_reconnect", serverName=name)

    async def toggle_mcp_server(self, name: str, enabled: bool) -> None:
        """Turn an MCP server of the config off (its tools go) or on again."""
        await self._require_control().request("mcp_toggle", serverName=name, enabled=enabled)

    async def stop_task(self, task_id: str) -> None:
        """Stop a background task (a subagent or a shell) by the id its task events carry."""
        await self._require_control().request("stop_task", task_id=task_id)

    def get_server_info(self) -> dict[str, Any]:
        """What claude answered to `initialize`: its commands, agents, output styles, models and account."""
        return dict(self.init_response)

    async def set_model(self, model: str | None) -> None:
        await self._require_control().request("set_model", model=model)

    async def set_permission_mode(self, mode: str) -> None:
        await self._require_control().request("set_permission_mode", mode=mode)
