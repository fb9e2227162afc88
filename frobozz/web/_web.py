"""What every page of the web view reads from (the settings, the runs, memory, the templates), and who is
asking: a scoped token's grant arrives as `request.state.grant` from the token check in front of the app."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, PackageLoader, pass_context, select_autoescape
from starlette.datastructures import URL
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from frobozz.memory import MemoryService

from ._routines import Routines
from ._runs import Runs
from .settings import WebSettings


class Web:
    """What every page reads from: the settings, the runs, memory, and the templates."""

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.agent_served = True  # the agent service is mounted beside (serve all --http --workspaces)
        self.runs = Runs(settings)
        self.routines = Routines(settings)
        self.memory = MemoryService(settings)
        env = Environment(
            loader=PackageLoader("frobozz.web"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters["when"] = lambda value: str(value or "")[:16].replace("T", " ")
        self.templates = Jinja2Templates(env=env)
        env.globals["url_for"] = site_path  # (after: Jinja2Templates sets its own, absolute, in its place)

    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    async def aclose(self) -> None:
        await self.runs.aclose()
        await self.routines.aclose()
        await self.memory.aclose()


def web_of(request: Request) -> Web:
    return request.app.state.web


def grant_of(request: Request) -> Any:
    """The caller's scoped grant (`may(namespace, write=)`), or None: one token, which may do anything."""
    return getattr(request.state, "grant", None)


@pass_context
def site_path(context: Mapping[str, Any], name: str, /, **path_params: Any) -> str:
    """A page's link as a path on this site. Starlette's own is an absolute URL built from the request's `Host`,
    which the client sets: behind a proxy the links led to the proxy's inside name, and a forged one led
    anywhere."""
    return local(context["request"].url_for(name, **path_params))


def local(url: URL) -> str:
    return url.path + (f"?{url.query}" if url.query else "")


def no_nul(value: str, what: str) -> str:
    """`value`, refused (400) when it holds a NUL: no text in Postgres does, and it refuses a query with one."""
    if "\0" in value:
        raise HTTPException(400, f"{what} contains a NUL character")
    return value


def same_origin(request: Request) -> None:
    """A form that changes something must come from a page of this site (the cookie is SameSite=Strict too)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, "this form must be sent from Frobozz's own pages")
