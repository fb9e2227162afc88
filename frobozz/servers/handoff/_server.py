"""The `handoff` MCP server: when a context window is nearly full or a session ends, the model
writes its next self a letter (what was done, what comes next, what to remember); the next
window reads it. Letters live in cortex's Postgres, keyed by claude's session id and namespace: over stdio the one
claude gives its servers, over HTTP the one the request names in X-Frobozz-Session-Id (claude sends none of its
own: `frobozz mcp-config --url` has it send $FROBOZZ_SESSION_ID), else none. A tool given no namespace works in the
server's default one, or over HTTP in the one the request names in X-Frobozz-Namespace (as cortex does)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from ...memory import MAX_ITEM_CHARS, MAX_ITEMS, HandoffStore, Letter, MemoryService, MemoryStoreError
from .._complete import offer_completion
from .._configs import SESSION_HEADER
from .._grants import asked, check, readable
from .._logs import offer_logging
from .._tools import closing, hints, tool_errors
from .settings import Settings


class HandedOff(BaseModel):
    handoff_id: int
    memory_ids: list[int] = Field(description="The cortex memories the letter's `memories` became.")


class RememberedOut(BaseModel):
    id: int
    content: str


class LetterOut(BaseModel):
    id: int
    namespace: str
    session_id: str | None
    summary: str
    next_steps: list[str]
    memories: list[RememberedOut]
    created_at: datetime


class Latest(BaseModel):
    handoff: LetterOut | None = Field(description="The newest letter, or null when none was written yet.")


class LetterBrief(BaseModel):
    id: int
    session_id: str | None
    created_at: datetime
    summary: str = Field(description="The summary's first 300 characters.")
    next_steps: int
    memories: int


class Letters(BaseModel):
    handoffs: list[LetterBrief]


MAX_SESSION_ID = 200  # claude's are UUIDs (36)
Namespace = Annotated[str | None, Field(max_length=100, description="Keeps agents' letters apart.")]
Items = Annotated[list[Annotated[str, Field(max_length=MAX_ITEM_CHARS)]] | None, Field(max_length=MAX_ITEMS)]


def _out(letter: Letter) -> LetterOut:
    return LetterOut(
        id=letter.id,
        namespace=letter.namespace,
        session_id=letter.session_id,
        summary=letter.summary,
        next_steps=letter.next_steps,
        created_at=letter.created_at,
        memories=[RememberedOut(id=m.id, content=m.content) for m in letter.memories],
    )


def create_server(
    settings: Settings | None = None,
    service: MemoryService | None = None,
    session: Callable[[], str | None] | None = None,
) -> MCPServer:
    """`service`: one shared with other servers in the process (`MemoryService.sharing`), else its own.
    `session`: the claude session now served, asked at each letter (in claude's process, not a subprocess of
    it, no CLAUDE_CODE_SESSION_ID says it; the environment's would be another's, a claude this one runs in)."""
    settings = settings or Settings()
    memory = service or MemoryService(settings)

    def signer(ctx: Context) -> str | None:
        """Whose letter it is. Over HTTP, the session the request names, or none: the hub's own environment is
        no client's (a CLAUDE_CODE_SESSION_ID there is a claude the hub was started from). Else the session
        served now (in claude's process), or the one claude gave this stdio server."""
        headers = getattr(ctx.request_context.request, "headers", None)
        if headers is None:
            return session() if session is not None else settings.session_id
        named = headers.get(SESSION_HEADER, "").strip()
        if named.startswith("${"):  # a variable claude did not expand (written without a default, and unset)
            return None
        if len(named) > MAX_SESSION_ID:
            raise ToolError(f"the {SESSION_HEADER} header is longer than {MAX_SESSION_ID} characters: nothing written")
        return named or None

    async def letters(namespace: str | None = None, *, write: bool | None = None) -> HandoffStore:
        """The letters; with `write` given, once the caller's token may read (or write) `namespace`."""
        store = await memory.handoffs(max_chars=settings.handoff_max_chars)
        if write is not None:
            check(store.memories.namespace(namespace), write=write)
        return store

    server = MCPServer(
        "frobozz-handoff",
        title="Frobozz handoff",
        lifespan=closing(memory.aclose),
        instructions="Before your context window fills up or the session ends, call `handoff` with a "
        "letter to your next self; at the start of a new window, `latest_handoff` reads it.",
    )

    @server.tool(annotations=hints("Hand off to the next context window", read_only=False))
    async def handoff(
        summary: Annotated[str, Field(description="What was done and where things stand.")],
        ctx: Context,
        next_steps: Items = None,
        memories: Items = None,
        namespace: Namespace = None,
    ) -> HandedOff:
        """Write the letter your next context window reads first; each of `memories` is also stored in cortex."""
        namespace = asked(namespace, ctx)
        with tool_errors(MemoryStoreError):
            letter_id, memory_ids = await (await letters(namespace, write=True)).write(
                summary, next_steps, memories, namespace, signer(ctx)
            )
            return HandedOff(handoff_id=letter_id, memory_ids=memory_ids)

    @server.tool(annotations=hints("Read the latest handoff", read_only=True, idempotent=True))
    async def latest_handoff(ctx: Context, namespace: Namespace = None) -> Latest:
        """The newest letter in the namespace (from any session), with its memories."""
        namespace = asked(namespace, ctx)
        with tool_errors(MemoryStoreError):
            letter = await (await letters(namespace, write=False)).latest(namespace)
            return Latest(handoff=_out(letter) if letter else None)

    @server.tool(annotations=hints("Read a handoff", read_only=True, idempotent=True))
    async def read_handoff(id: Annotated[int, Field(ge=1, le=2**62)]) -> LetterOut:
        """One letter by its id."""
        with tool_errors(MemoryStoreError):
            letter = await (await letters()).read(id)
            check(letter.namespace, write=False, what=f"hand-off letter {id}")
            return _out(letter)

    @server.tool(annotations=hints("List handoffs", read_only=True, idempotent=True))
    async def list_handoffs(
        ctx: Context, limit: Annotated[int, Field(ge=1, le=200)] = 10, namespace: Namespace = None
    ) -> Letters:
        """The newest letters first, briefly; read_handoff gives one whole."""
        namespace = asked(namespace, ctx)
        with tool_errors(MemoryStoreError):
            return Letters(
                handoffs=[
                    LetterBrief(
                        id=x.id,
                        session_id=x.session_id,
                        created_at=x.created_at,
                        summary=x.summary[:300],
                        next_steps=len(x.next_steps),
                        memories=len(x.memory_ids),
                    )
                    for x in await (await letters(namespace, write=False)).recent(limit, namespace)
                ]
            )

    @server.prompt(title="Pick up where the last window left off")
    def pick_up(
        namespace: Annotated[
            str, Field(description="Whose letters (it completes from the namespaces in use).", max_length=100)
        ] = "",
    ) -> str:
        """Read the latest handoff letter and go on from it (the namespace completes from those in use)."""
        where = f" of the namespace {namespace!r}" if namespace else ""
        return (
            f"Read the latest handoff letter{where} with latest_handoff, say in two lines where things stand, "
            "and go on with its next steps."
        )

    async def namespaces(typed: str, _: object) -> list[str]:
        return readable(await (await letters()).memories.namespaces())

    offer_completion(server, {("pick_up", "namespace"): namespaces}, expected=(MemoryStoreError,))
    offer_logging(server)
    return server
