"""The memory pages: search cortex (the same hybrid search, its scores shown) by namespace and date, the
newest memories and hand-off letters, one memory or letter, and forgetting one (after asking)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol, TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from frobozz.memory import (
    DATABASE_ERRORS,
    MAX_QUERY_CHARS,
    EmbeddingMismatchError,
    Memory,
    MemoryStoreError,
    before_said,
)

from ._web import grant_of, local, no_nul, same_origin, web_of

T = TypeVar("T")
MAX_QUERY = MAX_QUERY_CHARS  # one limit for the web, the CLI and cortex


async def _memory(work: Awaitable[T]) -> T:
    """The store's answer; a missing database, a model mismatch and the store's refusals as the pages' errors."""
    try:
        return await work
    except DATABASE_ERRORS as e:
        raise HTTPException(
            503, f"the memory database is not reachable right now ({type(e).__name__}); try again when it is back"
        ) from None
    except EmbeddingMismatchError as e:
        raise HTTPException(503, str(e)) from None
    except MemoryStoreError as e:
        raise HTTPException(404 if str(e).startswith("no ") else 400, str(e)) from None


def _may(request: Request, namespace: str, *, write: bool = False) -> bool:
    grant = grant_of(request)
    return grant is None or grant.may(namespace, write=write)


def _first_readable(request: Request, default: str) -> str:
    """The namespace the page opens on when none is asked for: a scoped token's own (its first write namespace,
    else its first read one; before, the default namespace, which such a token may not read, was a 403), else
    the store's default."""
    grant = grant_of(request)
    if grant is None:
        return default
    named = [ns for ns in (*grant.write, *grant.read) if ns != "*" and grant.may(ns, write=False)]
    return named[0] if named else default


def _id(request: Request, name: str) -> int:
    """A memory's or letter's id from the path; one past what Postgres can hold is simply not there."""
    value: int = request.path_params[name]  # an {…:int} path parameter
    if value >= 2**63:
        raise HTTPException(404, f"no {name.removesuffix('_id')} {value}")
    return value


def _day(value: str | None, name: str, *, end: bool = False) -> datetime | None:
    if not value:
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise HTTPException(400, f"{name} must be a date like 2026-11-23") from None
    if end and day == date.max:  # the end of the last day there is: no end (its next day was a 500)
        return None
    return datetime.combine(day + timedelta(days=1) if end else day, time(), UTC)


def _number(value: str | None) -> int | None:
    """A memory's id from the redirect after a forget (anything else: none, nothing said of it)."""
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 19 else None


async def memory_page(request: Request) -> HTMLResponse:
    web = web_of(request)
    store = await _memory(web.memory.store())
    params = request.query_params
    query = (params.get("q") or "").strip()
    if len(query) > MAX_QUERY:
        raise HTTPException(400, f"the search is {len(query):,} characters; at most {MAX_QUERY:,}")
    no_nul(query, "the search")
    namespaces = {ns: n for ns, n in (await _memory(store.namespaces())).items() if _may(request, ns)}
    namespace = params.get("namespace") or _first_readable(request, store.default_namespace)
    if not _may(request, namespace):
        raise HTTPException(403, f"this token may not read namespace {namespace[:100]!r}")
    since, until = _day(params.get("since"), "since"), _day(params.get("until"), "until", end=True)
    hits = None
    if query:
        hits = await _memory(store.search(query, limit=20, since=since, until=until, namespace=namespace))
    recent = await _memory(store.recent(20, namespace))
    letters = await _memory((await web.memory.handoffs()).recent(10, namespace))
    pictured = await _memory(
        (await _memory(web.memory.images())).with_images([h.memory.id for h in hits or ()] + [m.id for m in recent])
    )
    return web.page(
        request,
        "memory.html",
        query=query,
        namespace=namespace,
        namespaces=namespaces,
        hits=hits,
        pictured=pictured,
        recent=recent,
        letters=letters,
        since=params.get("since") or "",
        until=params.get("until") or "",
        forgotten=params.get("forgotten"),
        forgotten_said=before_said(_number(params.get("current_again")), _number(params.get("kept_as_history"))),
    )


class _Kept(Protocol):  # read-only: a frozen Memory or Letter is one
    @property
    def id(self) -> int: ...
    @property
    def namespace(self) -> str: ...


K = TypeVar("K", bound=_Kept)


async def _readable(request: Request, kind: str, read: Callable[[int], Awaitable[K]]) -> K:
    """The memory or letter the path names, if the caller may read its namespace."""
    found = await _memory(read(_id(request, f"{kind}_id")))
    if not _may(request, found.namespace):
        raise HTTPException(403, f"this token may not read {kind} {found.id}")
    return found


async def _memory_of(request: Request) -> Memory:
    return await _readable(request, "memory", (await _memory(web_of(request).memory.store())).get)


async def one_memory(request: Request) -> HTMLResponse:
    found = await _memory_of(request)
    store = await _memory(web_of(request).memory.store())
    history = await _memory(store.history(found.id)) if found.supersedes or found.superseded_by else [found]
    image = await _memory((await _memory(web_of(request).memory.images())).image(found.id))
    return web_of(request).page(
        request,
        "memory_one.html",
        m=found,
        history=history,
        image=image,
        may_forget=_may(request, found.namespace, write=True),
    )


async def memory_image(request: Request) -> Response:
    """A memory's image: its thumbnail (a JPEG), or with ?original=1 the file as it was stored."""
    found = await _memory_of(request)
    images = await _memory(web_of(request).memory.images())
    image = await _memory(images.image(found.id))
    if image is None:
        raise HTTPException(404, f"memory {found.id} has no image")
    original = request.query_params.get("original") == "1"
    data = await _memory(images.read(image, thumbnail=not original))
    return Response(
        data,
        media_type=image.media_type if original else "image/jpeg",
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600"},
    )


async def forget(request: Request) -> Response:
    """GET asks first; POST (from that page) forgets."""
    found = await _memory_of(request)
    if not _may(request, found.namespace, write=True):
        raise HTTPException(403, f"this token may not forget memories in namespace {found.namespace!r}")
    web = web_of(request)
    if request.method == "GET":
        return web.page(request, "forget.html", m=found)
    same_origin(request)
    store = await _memory(web.memory.store())
    done = await _memory(store.forget(found.id))
    said = {k: v for k, v in (("current_again", done.current_again), ("kept_as_history", done.kept_as_history)) if v}
    url = request.url_for("memory").include_query_params(namespace=found.namespace, forgotten=found.id, **said)
    return RedirectResponse(local(url), status_code=303)


async def letter_page(request: Request) -> HTMLResponse:
    web = web_of(request)
    letter = await _readable(request, "letter", (await _memory(web.memory.handoffs())).read)
    return web.page(request, "letter.html", letter=letter)


routes = [
    Route("/memory", memory_page, name="memory"),
    Route("/memory/{memory_id:int}", one_memory, name="memory_one"),
    Route("/memory/{memory_id:int}/image", memory_image, name="memory_image"),
    Route("/memory/{memory_id:int}/forget", forget, methods=["GET", "POST"], name="forget"),
    Route("/letters/{letter_id:int}", letter_page, name="letter"),
]
