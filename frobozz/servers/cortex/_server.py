"""The `cortex` MCP server: long-term memory on Postgres + pgvector (store, search, recent, …). A tool given no
namespace works in the server's default one (FROBOZZ_CORTEX_DEFAULT_NAMESPACE), or over HTTP in the one the
request names in X-Frobozz-Namespace (`frobozz mcp-config --url --namespace`), checked as any other."""

from __future__ import annotations

import base64
import logging
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, Field, model_validator

from ...memory import ImageInput, Memory, MemoryImage, MemoryService, MemoryStore, MemoryStoreError
from .._complete import offer_completion
from .._grants import asked, check, readable, scoped
from .._logs import offer_logging
from .._tools import closing, hints, tool_errors
from .settings import Settings

log = logging.getLogger("frobozz.servers.cortex")


class ImageIn(BaseModel):
    """An image to keep with the memory: a file the server may read, or base64 data with its media type."""

    path: str | None = Field(
        default=None,
        max_length=4096,
        description=("A file under the folders the server allows (FROBOZZ_CORTEX_IMAGE_FOLDERS)."),
    )
    data: str | None = Field(default=None, description="The image's bytes in base64 (instead of a path).")
    media_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"] | None = Field(
        default=None, description="The type of base64 data (required with data)."
    )

    @model_validator(mode="after")
    def _one(self) -> ImageIn:
        if (self.path is None) == (self.data is None):
            raise ValueError("give the image either as a path or as base64 data with its media_type")
        if self.data is not None and self.media_type is None:
            raise ValueError("base64 data needs its media_type (image/png, image/jpeg, image/gif or image/webp)")
        return self


class ImageOut(BaseModel):
    media_type: str
    bytes: int
    width: int
    height: int
    thumbnail_width: int = Field(description="The thumbnail is a JPEG whose long edge is at most 768 px.")
    thumbnail_height: int
    description: str | None = Field(
        description=("What the vision model saw (also in the memory's content, so words find it); null without one.")
    )


class Stored(BaseModel):
    id: int
    created_at: datetime
    duplicate_of: int | None = Field(description="Set when the exact text was already stored: nothing new was kept.")
    image: ImageOut | None = Field(default=None, description="The image kept with the memory, when one was given.")


class MemoryOut(BaseModel):
    id: int
    content: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    namespace: str
    source: str | None
    valid_to: datetime | None = Field(default=None, description="When a newer memory superseded this one.")
    supersedes: int | None = Field(default=None, description="The memory this one replaced.")
    superseded_by: int | None = Field(default=None, description="The memory that replaced this one.")


class MemoryWithHistory(MemoryOut):
    history: list[MemoryOut] = Field(
        description=("Every version of this fact, oldest first, this one included (one entry when it never changed).")
    )
    image: ImageOut | None = Field(default=None, description="Its image (the thumbnail comes as image content).")


class SearchHit(BaseModel):
    id: int
    content: str
    score: float = Field(description="In [0, 1], comparable across queries: near 1 an exact match, near 0 unrelated.")
    created_at: datetime
    metadata: dict[str, Any]
    parts: dict[str, float] | None = Field(default=None, description="The score's parts, when explain is true.")
    valid_to: datetime | None = Field(
        default=None,
        description=("Set on a superseded memory (include_history only): when a newer one took its place."),
    )
    superseded_by: int | None = None
    has_image: bool = Field(default=False, description="An image is kept with it: get returns its thumbnail.")


class SearchResults(BaseModel):
    results: list[SearchHit]


class Memories(BaseModel):
    memories: list[MemoryOut]


class Forgotten(BaseModel):
    id: int
    forgotten: bool
    current_again: int | None = Field(
        default=None,
        description="The version it superseded, current again (when it was the current version of a changed fact).",
    )
    kept_as_history: int | None = Field(
        default=None,
        description="The version it superseded, kept as history: another current memory says exactly the same.",
    )
    said: str = Field(description="What forgetting it did, in words.")


Namespace = Annotated[str | None, Field(max_length=100, description="Keeps agents' memories apart.")]
MemoryId = Annotated[int, Field(ge=1, le=2**62)]
MinScore = Annotated[
    float,
    Field(
        ge=0.0,
        le=1.0,
        description=(
            "Leave out results scoring under this (scores are absolute, in [0, 1]; 0.3 keeps what is likely relevant)."
        ),
    ),
]


def _image_out(i: MemoryImage) -> ImageOut:
    return ImageOut(
        media_type=i.media_type,
        bytes=i.bytes,
        width=i.width,
        height=i.height,
        thumbnail_width=i.thumbnail_width,
        thumbnail_height=i.thumbnail_height,
        description=i.description,
    )


def _out(m: Memory) -> MemoryOut:
    return MemoryOut(
        id=m.id,
        content=m.content,
        created_at=m.created_at,
        updated_at=m.updated_at,
        metadata=m.metadata,
        namespace=m.namespace,
        source=m.source,
        valid_to=m.valid_to,
        supersedes=m.supersedes,
        superseded_by=m.superseded_by,
    )


async def writable(store: MemoryStore, memory_id: int) -> None:
    """Under a scoped token: refuse a memory outside the namespaces it may write (one that does not exist,
    or was forgotten, is left to the tool to report, as without a token)."""
    if not scoped():
        return
    try:
        memory = await store.get(memory_id)
    except MemoryStoreError:
        return
    check(memory.namespace, write=True, what=f"memory {memory_id}")


def create_server(settings: Settings | None = None, service: MemoryService | None = None) -> MCPServer:
    """`service`: one shared with other servers in the process (`MemoryService.sharing`), else its own."""
    settings = settings or Settings()
    cortex = service or MemoryService(settings)

    async def memories(namespace: str | None = None, *, write: bool | None = None) -> MemoryStore:
        """The store; with `write` given, once the caller's token may read (or write) `namespace`."""
        store = await cortex.store()
        if write is not None:
            check(store.namespace(namespace), write=write)
        return store

    server = MCPServer(
        "frobozz-cortex",
        title="Frobozz cortex",
        lifespan=closing(cortex.aclose),
        instructions="Long-term memory: store what matters, search it later (hybrid by default).",
    )

    @server.tool(
        annotations=hints(
            "Store a memory",
            read_only=False,  # a vision model reached: open world
            open_world=bool(settings.cortex_vision_model),
        )
    )
    async def store(
        content: Annotated[str, Field(description="What to remember.")],
        ctx: Context,
        metadata: dict[str, Any] | None = None,
        namespace: Namespace = None,
        image: Annotated[
            ImageIn | None,
            Field(
                description=(
                    "An image to keep with it (PNG, JPEG, GIF or WebP): get returns its thumbnail, and a "
                    "vision model's description, when one is configured, makes it found by words."
                )
            ),
        ] = None,
    ) -> Stored:
        """Remember `content` (returns once it is committed); the exact same text is not stored twice."""
        namespace = asked(namespace, ctx)
        with tool_errors(MemoryStoreError):
            kept = None
            if image is None:
                memory, duplicate = await (await memories(namespace, write=True)).store(
                    content, metadata, namespace, source="mcp"
                )
            else:
                await memories(namespace, write=True)
                memory, duplicate, kept = await (await cortex.images()).remember(
                    content,
                    ImageInput(path=image.path, data=image.data, media_type=image.media_type),
                    metadata,
                    namespace,
                    source="mcp",
                )
            if settings.cortex_seen_session:
                try:
                    await (await cortex.sessions()).mark_seen(settings.cortex_seen_session, [memory.id])
                except MemoryStoreError as e:  # the memory is kept: recall may only show it once more
                    log.warning(
                        "cortex: %s was not marked seen in session %s: %s", memory.id, settings.cortex_seen_session, e
                    )
            return Stored(
                id=memory.id,
                created_at=memory.created_at,
                duplicate_of=duplicate,
                image=_image_out(kept) if kept else None,
            )

    @server.tool(annotations=hints("Search memories", read_only=True, idempotent=True))
    async def search(
        query: Annotated[str, Field(description="What to look for, in words.")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=200)] = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: Namespace = None,
        mode: Literal["hybrid", "semantic", "keyword"] = "hybrid",
        explain: bool = False,
        min_score: MinScore = 0.0,
        include_history: Annotated[
            bool, Field(description=("Also superseded memories (facts that changed), marked by valid_to."))
        ] = False,
    ) -> SearchResults:
        """Memories ranked by meaning and words (hybrid), meaning only (semantic) or words only (keyword).
        Scores are absolute, in [0, 1]: about 0.3 and above is likely relevant, under 0.2 barely related.
        Current memories only, unless include_history."""
        namespace = asked(namespace, ctx)
        with tool_errors(MemoryStoreError):
            hits = await (await memories(namespace, write=False)).search(
                query,
                limit=limit,
                since=since,
                until=until,
                namespace=namespace,
                mode=mode,
                min_score=min_score,
                include_history=include_history,
            )
            return SearchResults(
                results=[
                    SearchHit(
                        id=h.memory.id,
                        content=h.memory.content,
                        score=round(h.score, 6),
                        created_at=h.memory.created_at,
                        metadata=h.memory.metadata,
                        parts=h.parts if explain else None,
                        valid_to=h.memory.valid_to,
                        superseded_by=h.memory.superseded_by,
                        has_image=h.has_image,
                    )
                    for h in hits
                ]
            )

    @server.tool(annotations=hints("Recent memories", read_only=True, idempotent=True))
    async def recent(
        ctx: Context, limit: Annotated[int, Field(ge=1, le=500)] = 10, namespace: Namespace = None
    ) -> Memories:
        """The newest memories first."""
        namespace = asked(namespace, ctx)
        with tool_errors(MemoryStoreError):
            return Memories(
                memories=[_out(m) for m in await (await memories(namespace, write=False)).recent(limit, namespace)]
            )

    @server.tool(annotations=hints("Get a memory", read_only=True, idempotent=True))
    async def get(id: MemoryId) -> Annotated[CallToolResult, MemoryWithHistory]:
        """One memory by its id, with every version of its fact (when it superseded or was superseded), and
        its image's thumbnail as image content when it has one."""
        with tool_errors(MemoryStoreError):
            store_ = await cortex.store()
            memory = await store_.get(id)
            check(memory.namespace, write=False, what=f"memory {id}")
            history = await store_.history(id) if memory.supersedes or memory.superseded_by else [memory]
            images = await cortex.images()
            image = await images.image(id)
            out = MemoryWithHistory(
                **_out(memory).model_dump(),
                history=[_out(m) for m in history],
                image=_image_out(image) if image else None,
            )
            content: list[TextContent | ImageContent] = [TextContent(text=out.model_dump_json(indent=2))]
            if image is not None:
                thumbnail = await images.read(image)
                content.append(ImageContent(data=base64.b64encode(thumbnail).decode(), mime_type="image/jpeg"))
            return CallToolResult(content=content, structured_content=out.model_dump(mode="json"))

    @server.tool(annotations=hints("Update a memory", read_only=False, destructive=True, idempotent=True))
    async def update(id: MemoryId, content: str | None = None, metadata: dict[str, Any] | None = None) -> MemoryOut:
        """Change a memory. A new text never overwrites: it supersedes the memory (as supersede does), so
        the old version is kept as history and the memory returned is the new one, with a new id. Metadata
        alone is changed in place."""
        with tool_errors(MemoryStoreError):
            store_ = await cortex.store()
            await writable(store_, id)
            return _out(await store_.update(id, content, metadata))

    @server.tool(annotations=hints("Supersede a memory", read_only=False))
    async def supersede(
        old_id: MemoryId,
        content: Annotated[str, Field(description="The fact as it is now.")],
        metadata: dict[str, Any] | None = None,
    ) -> MemoryOut:
        """A fact changed: store `content` as a new memory that takes the place of `old_id` (same namespace;
        its metadata unless given). The old one is kept as history (valid_to, linked both ways) and no
        longer found by search unless include_history."""
        with tool_errors(MemoryStoreError):
            store_ = await cortex.store()
            await writable(store_, old_id)
            return _out(await store_.supersede(old_id, content, metadata))

    @server.tool(annotations=hints("Forget a memory", read_only=False, destructive=True, idempotent=False))
    async def forget(id: MemoryId) -> Forgotten:
        """Forget a memory (soft deletion: it no longer appears anywhere). Forgetting the current version of a
        changed fact makes the version it superseded current again (current_again); forgetting an older version
        links the versions either side of it."""
        with tool_errors(MemoryStoreError):
            store_ = await cortex.store()
            await writable(store_, id)
            done = await store_.forget(id)
            return Forgotten(
                id=done.memory.id,
                forgotten=True,
                current_again=done.current_again,
                kept_as_history=done.kept_as_history,
                said=f"forgot memory {done.memory.id}" + (f"; {done.said}" if done.said else ""),
            )

    @server.prompt(title="Recall")
    def recall(
        about: Annotated[str, Field(description="What to remember.", max_length=2000)],
        namespace: Annotated[
            str, Field(description="The namespace to search (it completes from those in use).", max_length=100)
        ] = "",
    ) -> str:
        """Search memory before answering (the namespace completes from those that hold memories)."""
        where = f" in the namespace {namespace!r}" if namespace else ""
        return (
            f"Before you answer, search cortex{where} for what is remembered about {about!r} (search, then get "
            "for the whole of a memory), and say what you found and how it bears on the question."
        )

    async def namespaces(typed: str, _: object) -> list[str]:
        return readable(await (await cortex.store()).namespaces())

    offer_completion(server, {("recall", "namespace"): namespaces}, expected=(MemoryStoreError,))
    offer_logging(server)
    return server
