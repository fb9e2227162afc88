"""The `fetch` MCP server: read a web page, feed, PDF, JSON, text or image, safely."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from functools import partial
from typing import Annotated, TypeVar

import anyio
import httpx
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, Field

from .._complete import offer_completion
from .._logs import offer_logging
from .._tools import closing, hints, tool_errors
from ._cache import Cache
from ._convert import convert, github_raw, markdown_alternate, page
from ._http import Fetched, Http
from ._youtube import transcript, video_id
from .exceptions import FetchError
from .settings import Settings

log = logging.getLogger("frobozz.fetch")
T = TypeVar("T")
ACCEPT = "text/markdown, text/html;q=0.9, application/xhtml+xml;q=0.9, */*;q=0.8"


class FetchResult(BaseModel):
    url: str
    final_url: str
    status: int
    content_type: str
    title: str | None
    length: int = Field(description="Characters of text in the whole document.")
    truncated: bool
    next_start_index: int | None = Field(description="Pass as start_index to read on; null at the end.")
    content: str = Field(
        description="This part of the text (clients that show only structured output, as claude does, read it here)."
    )


def _text_result(
    url: str,
    final_url: str,
    status: int,
    content_type: str,
    title: str | None,
    text: str,
    start_index: int,
    max_length: int,
    *,
    capped: bool = False,
) -> CallToolResult:
    """One part of a text, with where the next part starts, as the tool's result."""
    part, next_start = page(text, start_index, max_length)
    if next_start is not None:
        part += f"\n\n[Content truncated: call fetch with start_index={next_start} to read on.]"
    elif start_index and not part:
        part = f"[No more content: the text has {len(text)} characters.]"
    result = FetchResult(
        url=url,
        final_url=final_url,
        status=status,
        content_type=content_type,
        title=title,
        length=len(text),
        truncated=next_start is not None or capped,
        next_start_index=next_start,
        content=part,
    )
    return CallToolResult(content=[TextContent(type="text", text=part)], structured_content=result.model_dump())


def create_server(settings: Settings | None = None) -> MCPServer:
    settings = settings or Settings()
    http = Http(settings)
    cache = Cache(settings.cache_dir, settings.fetch_cache_ttl) if settings.fetch_cache else None

    server = MCPServer(
        "frobozz-fetch",
        title="Frobozz fetch",
        lifespan=closing(http.aclose),
        instructions="Read the web: pages as Markdown, feeds, PDFs, JSON, text and images.",
    )

    cache_failed = False

    def keep(fetched: Fetched, accept: str) -> None:
        """Store a fetch in the cache; the cache is an optimisation, so a cache that cannot be written is
        said once on stderr and the page is returned all the same."""
        nonlocal cache_failed
        assert cache is not None
        try:
            cache.store(fetched, accept)
        except OSError as e:
            if not cache_failed:
                log.warning("fetch cannot write its cache in %s (%s); pages are fetched each time", cache.dir, e)
            cache_failed = True

    async def get(url: str, accept: str = ACCEPT) -> Fetched:
        if cache is None:
            return await http.get(url, accept=accept)
        cached = cache.load(url, accept)
        if cached and cached[1] < cache.ttl:
            return cached[0]
        fetched = await http.get(url, accept=accept, headers=Cache.validators(cached[0]) if cached else None)
        if fetched.status == 304 and cached:
            keep(cached[0], accept)  # still good: fresh again from now
            return cached[0]
        keep(fetched, accept)
        return fetched

    async def off_loop(work: Callable[[], T], url: str, deadline: float) -> T:
        """Parsing in a worker thread (not on the loop that serves every other call), given up at the fetch's
        deadline; a thread cannot be stopped, so it finishes in the background, its result unused."""
        try:
            with anyio.fail_at(deadline):
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except TimeoutError:
            raise FetchError(
                f"reading {url[:200]} took longer than {settings.fetch_total_timeout:g} s "
                "(FROBOZZ_FETCH_TOTAL_TIMEOUT): the page is too large or too convoluted to convert; "
                "try raw=true for its text as it is"
            ) from None

    @server.tool(annotations=hints("Fetch a URL", read_only=True, idempotent=True, open_world=True))
    async def fetch(
        url: Annotated[str, Field(description="An http(s) URL.", max_length=8192)],
        max_length: Annotated[int, Field(ge=1, le=1_000_000, description="Characters to return at most.")] = 20000,
        start_index: Annotated[int, Field(ge=0, description="Where to start, for the next part of a long text.")] = 0,
        raw: Annotated[bool, Field(description="The page's HTML (or the text) as it is, not converted.")] = False,
    ) -> Annotated[CallToolResult, FetchResult]:
        """Fetch a URL and return its content for reading: pages as Markdown, RSS/Atom feeds as lists,
        PDFs as text with page markers, JSON pretty-printed, images as pictures. GitHub file and
        repository links give the raw file or README. Long texts come in parts (see next_start_index)."""
        with tool_errors(FetchError):
            deadline = anyio.current_time() + settings.fetch_total_timeout
            try:
                target = httpx.URL(url.strip())
            except (httpx.InvalidURL, ValueError) as e:
                raise FetchError(f"not a URL: {url[:200]!r} ({e})") from e
            video = video_id(str(target), settings.fetch_youtube_url)
            if video:
                try:
                    text, title = await transcript(video, settings)
                except TimeoutError:
                    raise FetchError(f"YouTube took longer than {settings.fetch_total_timeout:g} s") from None
                return _text_result(url, str(target), 200, "text/x-transcript", title, text, start_index, max_length)
            source = github_raw(str(target), settings.fetch_github_url, settings.fetch_github_raw_url)
            fetched = await get(source[0] if source else str(target))
            if fetched.status >= 400:
                raise FetchError(
                    f"{fetched.final_url[:300]} answered HTTP {fetched.status}"
                    + (": not found" if fetched.status == 404 else "")
                    + ("; try again later" if fetched.status >= 500 else "")
                )
            if fetched.content_type in ("text/html", "application/xhtml+xml") and not raw:
                head = fetched.body[:65536].decode("utf-8", "replace")
                alternate = await off_loop(partial(markdown_alternate, head, fetched.final_url), url, deadline)
                if alternate:
                    try:
                        markdown = await get(alternate)
                        if markdown.status == 200 and "markdown" in markdown.content_type:
                            fetched = markdown
                    except FetchError as e:
                        log.info("the page's Markdown version at %s failed: %s", alternate, e)
            converted = await off_loop(  # seconds of parsing on a large page or PDF
                partial(convert, fetched, raw=raw, image_px=settings.fetch_image_px), url, deadline
            )
            if converted.image is not None:
                result = FetchResult(
                    url=url,
                    final_url=fetched.final_url,
                    status=fetched.status,
                    content_type=fetched.content_type,
                    title=None,
                    length=0,
                    truncated=False,
                    next_start_index=None,
                    content=converted.text,
                )
                picture = ImageContent(
                    type="image",
                    data=base64.b64encode(converted.image).decode(),
                    mime_type=converted.image_mime or "image/png",
                )
                return CallToolResult(
                    content=[picture, TextContent(type="text", text=converted.text)],
                    structured_content=result.model_dump(),
                )
            text = converted.text
            if fetched.capped:
                text += f"\n\n[The body was cut at {settings.fetch_max_bytes} bytes, the most this server reads.]"
            return _text_result(
                url,
                fetched.final_url,
                fetched.status,
                fetched.content_type,
                converted.title,
                text,
                start_index,
                max_length,
                capped=fetched.capped,
            )

    @server.prompt(title="Read a page")
    def read_page(
        url: Annotated[
            str, Field(description="An http(s) URL (it completes from the pages already fetched).", max_length=8192)
        ],
    ) -> str:
        """Read a page and sum it up (the URL completes from the pages fetched before)."""
        return (
            f"Fetch {url} with the fetch tool (reading on with start_index while the text is truncated) "
            "and sum it up: what it is, its main points, and anything dated or doubtful."
        )

    async def fetched_urls(typed: str, _: object) -> list[str]:
        return cache.urls() if cache is not None else []

    offer_completion(server, {("read_page", "url"): fetched_urls}, expected=(OSError,))
    offer_logging(server)
    return server
