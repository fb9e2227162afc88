"""The web view's ASGI app: server-rendered pages (Starlette + Jinja2, a little plain JavaScript for live
runs), with its assets served from the package (no CDN: the machine may be offline).

Who may see what is decided in front of it (the hub's token, or `frobozz web`'s): the memory pages show
only the namespaces a scoped token may read, and offer to forget only where it may write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import _chat_page, _memory_pages, _routine_pages, _run_pages
from ._web import Web
from .settings import WebSettings

STATIC = Path(__file__).parent / "static"


def create_app(settings: WebSettings | None = None, *, agent_served: bool = True) -> Starlette:
    """The web view, reading runs and memory as `settings` (FROBOZZ_* variables by default) say;
    `agent_served=False` when nothing serves the agent service beside it (`frobozz web`): the chat page then
    says so at once, and how to have it, instead of offering a form that cannot work."""
    web = Web(settings or WebSettings())
    web.agent_served = agent_served

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await web.aclose()

    async def error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "something went wrong; the server's log says what"
        return web.page(request, "error.html", status_code=status, status=status, detail=detail)

    async def health(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [
        *_run_pages.routes,
        *_routine_pages.routes,
        *_memory_pages.routes,
        *_chat_page.routes,
        Route("/healthz", health),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: error, Exception: error})
    app.state.web = web
    return app
