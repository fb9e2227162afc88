"""`frobozz serve all --http`: every server from one process over streamable HTTP, each at
`/NAME/mcp`, behind one bearer token, so other MCP clients and claude sessions on other machines
share one memory. MCP sessions are stateless (any process can answer any request), and what the
servers keep lives in Postgres or the data directory (game sessions too: each change is shared
there), so several such processes can run behind a load balancer against one database."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from ._auth import BearerToken, ScopedTokens
from ._grants import Grant
from ._registry import SERVERS, load_server
from ._request_ids import RequestIds


def new_token() -> str:
    """A fresh bearer token for the hub (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def hub_app(
    names: list[str],
    token: str | None,
    *,
    host: str = "127.0.0.1",
    grants: list[Grant] | None = None,
    site: Starlette | None = None,
    mounts: dict[str, Starlette] | None = None,
    **overrides: Any,
) -> ASGIApp:
    """One ASGI app with each named server mounted at `/NAME` (its endpoint `/NAME/mcp`), `mounts` at their
    `/NAME` (the agent service), and `site` (the web view) at `/`, behind one token, or behind scoped tokens
    (`grants`; a mount is used only by a grant that names it)."""
    mounts = mounts or {}
    overrides = {**overrides, "game": {"game_shared_sessions": True, **overrides.get("game", {})}}
    servers = {name: load_server(name, **overrides.get(name, {})) for name in names}
    apps = {
        name: RequestIds(server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, host=host))
        for name, server in servers.items()
    }

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:  # each server's own lifespan, entered once, closed at the end
            for server in servers.values():
                await stack.enter_async_context(server.session_manager.run())
            # the mounts last, so unwound first: the agent service's own failure cancels this task until the
            # agent has left, and what is unwound after it closes undisturbed
            for extra in [*([site] if site is not None else []), *mounts.values()]:
                await stack.enter_async_context(extra.router.lifespan_context(extra))
            yield

    async def index(_: Request) -> JSONResponse:
        return JSONResponse({"servers": {n: {"endpoint": f"/{n}/mcp", "about": SERVERS[n].description} for n in apps}})

    async def health(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [
        Route("/servers", index),
        Route("/healthz", health),
        *(Mount(f"/{n}", app=a) for n, a in apps.items()),
        *(Mount(f"/{n}", app=a) for n, a in mounts.items()),
        *([Mount("/", app=site)] if site is not None else []),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    if grants is not None:
        return ScopedTokens(app, grants, frozenset(apps) | set(mounts))
    assert token is not None
    return BearerToken(app, token)
