"""The routines page: every routine with its trigger, its next firing, and its last firings with their outcome
(each firing's run linked to its run page)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from ._web import web_of


async def routines_page(request: Request) -> HTMLResponse:
    web = web_of(request)
    rows = await web.routines.rows()
    return web.page(request, "routines.html", rows=rows, notice=web.routines.database_error)


routes = [Route("/routines", routines_page, name="routines")]
