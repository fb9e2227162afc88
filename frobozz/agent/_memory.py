"""A session's memory (the `memory` option, `{"namespace": NS}`): the option checked when the session is made (its
namespace as the memory store names it), the options of its claude (the memory servers storing into that
namespace, when the service has them), and the memory loop around its turns (orientation, recall, the archive,
suggestions), whose sidecar is a bare claude of the same account."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from frobozz.engine import EngineOptions, WarmSpare
from frobozz.loop import MemorySession
from frobozz.memory import MemoryService, MemoryStoreError

from .exceptions import InputError

MemoryServers = Callable[[str], Mapping[str, Mapping[str, Any]]]  # a namespace -> MCP servers that store into it


async def memory_option(memory: Any, service: MemoryService) -> dict[str, str]:
    if not isinstance(memory, Mapping) or set(memory) != {"namespace"} or not isinstance(memory["namespace"], str):
        raise InputError('memory is {"namespace": NAME}: the namespace the session remembers in')
    try:
        return {"namespace": (await service.store()).namespace(memory["namespace"])}
    except MemoryStoreError as e:
        raise InputError(str(e)) from e


def memory_options(
    options: EngineOptions, namespace: str, *, servers: MemoryServers | None
) -> tuple[EngineOptions, bool]:
    """The options of a memory session's claude (cortex storing into its namespace, when there is one; as the
    loop starts it: the spare primed with them serves it), and whether the model can store."""
    found = dict(servers(namespace)) if servers else {}
    if found:
        config = dict(options.mcp_config or {}) if isinstance(options.mcp_config, Mapping) else {}
        options = replace(options, mcp_config={"mcpServers": {**config.get("mcpServers", {}), **found}})
    return MemorySession.claude_options(options), bool(found)


def memory_loop(
    options: EngineOptions,
    namespace: str,
    resume: str | None,
    *,
    service: MemoryService,
    servers: MemoryServers | None,
    spare: WarmSpare | None,
) -> MemorySession:
    """The memory loop around a session's claude: orientation, recall, the archive, and (when the model can
    store) suggestions. Its sidecar is a bare claude of the same account: no tools, no MCP servers."""
    options, can_store = memory_options(options, namespace, servers=servers)
    sidecar = replace(
        options,
        tools=(),
        mcp_config=None,
        strict_mcp_config=True,
        hooks={},
        can_use_tool=None,
        allowed_tools=(),
        session_store=None,
        include_partial_messages=False,
        max_turns=None,
        max_budget_usd=None,
    )
    return MemorySession(
        options,
        service,
        namespace=namespace,
        client="frobozz agent",
        resume=resume,
        sidecar=sidecar,
        suggest=can_store,
        spare=spare,
    )
