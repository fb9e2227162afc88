"""`frobozz serve all --http`: every server from one process over streamable HTTP, each at
`/NAME/mcp`, behind one bearer token, so other MCP clients and claude sessions on other machines
share one memory. MCP sessions are stateless (any process can answer any request), and what the
servers keep lives in Postgres or the data directory (game sessions too: each change is shared
there), so several such processes can run behind a load balancer against one database."""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ._grants import Grant, find_grant, granted
from ._registry import SERVERS, load_server

OPEN_PATHS = frozenset({"/healthz"})  # for load balancers' health checks


def new_token() -> str:
    return secrets.token_urlsafe(32)


class BearerToken:
    """Pure ASGI (streams pass untouched): every request but the health check needs the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if len(token) < 16:
            raise ValueError("the hub's bearer token must be at least 16 characters")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _refuse(send, 401, "unauthorized: send the hub's token as 'Authorization: Bearer TOKEN'")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="frobozz"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"error": message}).encode()})


class ScopedTokens:
    """Pure ASGI, like BearerToken, for `FROBOZZ_HUB_TOKENS`: the caller's token picks its grant (hashes
    compared in constant time; tokens are never logged); a server outside it is refused here, and the
    tools see the grant (namespaces are checked there, before anything changes)."""

    def __init__(self, app: ASGIApp, grants: list[Grant]) -> None:
        self.app, self.grants = app, grants

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        grant = find_grant(self.grants, given[7:]) if given.startswith("Bearer ") else None
        if grant is None:
            await _refuse(send, 401, "unauthorized: send your hub token as 'Authorization: Bearer TOKEN'")
            return
        server = scope["path"].strip("/").split("/")[0]
        if server and not grant.may_use(server):
            await _refuse(send, 403, f"token {grant.name!r} may not use the {server} server "
                                     f"(it may use: {', '.join(grant.servers) or 'none'})")
            return
        with granted(grant):
            await self.app(scope, receive, send)


def hub_app(names: list[str], token: str | None, *, host: str = "127.0.0.1", grants: list[Grant] | None = None,
            **overrides: Any) -> ASGIApp:
    """One ASGI app with each named server mounted at `/NAME` (its endpoint `/NAME/mcp`), behind one token,
    or behind scoped tokens (`grants`)."""
    overrides = {**overrides, "game": {"game_shared_sessions": True, **overrides.get("game", {})}}
    servers = {name: load_server(name, **overrides.get(name, {})) for name in names}
    apps = {name: server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, host=host)
            for name, server in servers.items()}

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:  # each server's own lifespan, entered once, closed at the end
            for server in servers.values():
                await stack.enter_async_context(server.session_manager.run())
            yield

    async def index(_: Request) -> JSONResponse:
        return JSONResponse({"servers": {n: {"endpoint": f"/{n}/mcp", "about": SERVERS[n].description} for n in apps}})

    async def health(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    routes = [Route("/", index), Route("/healthz", health), *(Mount(f"/{n}", app=a) for n, a in apps.items())]
    app = Starlette(routes=routes, lifespan=lifespan)
    if grants is not None:
        return ScopedTokens(app, grants)
    assert token is not None
    return BearerToken(app, token)
