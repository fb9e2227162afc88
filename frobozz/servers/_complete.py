"""MCP completion for every Frobozz server: a prompt's argument completes with real values (the games there
are, the namespaces in use, a session's save slots, the URLs already fetched), the ones that begin with what
the user has typed so far."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

log = logging.getLogger("frobozz.servers")

# (what was typed so far, the prompt's other arguments already given) -> the values there are
Completer = Callable[[str, Mapping[str, str]], Awaitable[Iterable[str]]]
MAX_VALUES = 100  # the spec's limit for one answer
MAX_TYPED = 1000  # a longer partial value matches nothing worth suggesting


def offer_completion(
    server: MCPServer, completers: Mapping[tuple[str, str], Completer], expected: tuple[type[Exception], ...] = ()
) -> None:
    """Serve `completion/complete` (which advertises the capability) for each (prompt, argument) named.

    Anything else (another prompt, a resource, an argument with nothing to suggest) completes with nothing,
    as the SDK's own default does; a part's own error (`expected`, a database away) is logged and completes
    with nothing too: a suggestion is help, never a failure the user has to read."""

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        name = ref.name if isinstance(ref, PromptReference) else ref.uri
        completer = completers.get((name, argument.name))
        typed = argument.value
        if completer is None or len(typed) > MAX_TYPED:
            return Completion(values=[], total=0, has_more=False)
        try:
            values = await completer(typed, dict(context.arguments or {}) if context else {})
        except expected as e:
            log.warning("no completion for %s's %s: %s", name, argument.name, e)
            return Completion(values=[], total=0, has_more=False)
        found = matching(values, typed)
        return Completion(values=found[:MAX_VALUES], total=len(found), has_more=len(found) > MAX_VALUES)

    server.middleware.append(_prompt_errors)


async def _prompt_errors(ctx: Any, call_next: Any) -> Any:
    """An unknown prompt or a missing or bad argument is the caller's mistake: -32602 (Invalid params), as the
    spec says. MCPServer raises ValueError for them, which goes out as code 0 with a traceback in the server's
    log (an SDK defect, reported upstream)."""
    try:
        return await call_next(ctx)
    except ValueError as e:
        if ctx.method != "prompts/get":
            raise
        raise MCPError(INVALID_PARAMS, str(e)) from e


def matching(values: Iterable[str], typed: str) -> list[str]:
    """The values that begin with `typed` (case aside), each once, in their order."""
    prefix = typed.casefold()
    return list(dict.fromkeys(v for v in values if v.casefold().startswith(prefix)))
