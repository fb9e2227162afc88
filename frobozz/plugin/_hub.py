"""The hooks' memory served by the hub (`frobozz serve all --http` mounts it at /plugin): `POST /plugin/hook`
with the hook's request as JSON, behind the hub's token, answers as the daemon does. A plugin installed
with `--hub URL` calls it instead of starting a daemon of its own, so a user who runs the hub already has
one warm process for everything, and other machines' claudes share the same memory. A request that names no
namespace (a plugin installed without `--namespace`) works in the hub's default one, the one its cortex stores
in when the model names none (FROBOZZ_CORTEX_DEFAULT_NAMESPACE where the hub runs): not one made from claude's
folder, a path on another machine that the tools never see.

Behind scoped tokens (FROBOZZ_HUB_TOKENS) the hub's gate leaves the caller's grant in `request.state.grant`, as
for the web view; the namespace a hook works in (its own, or the hub's default) must be one the grant may write,
as cortex's tools check theirs: every hook event writes there (the session's record, its archive) and most
read (recall). Refused, the hook hears why, as memory that is off, and nothing is read or written. The hooks
(`HookMemory`) then work in that namespace alone: a session id that names another namespace's session is refused
the same way, and a transcript is read only from claude's projects folder where the hub runs, never from a path
elsewhere that the request names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ._daemon import MAX_REQUEST, MemoryDaemon, parse_request
from ._hook_memory import HookMemory
from .exceptions import PluginError
from .settings import PluginSettings


class Grant(Protocol):
    """What the hub's gate leaves in `request.state.grant` for a scoped token (frobozz.servers' Grant)."""

    name: str

    def may(self, namespace: str, *, write: bool) -> bool: ...


def _refused(request: Request, namespace: str) -> str | None:
    """Why the caller's token may not use `namespace` through the hooks, or None (allowed, or not scoped)."""
    grant: Grant | None = getattr(request.state, "grant", None)
    if grant is None or grant.may(namespace, write=True):
        return None
    return f"token {grant.name!r} may not use namespace {namespace!r} (the hooks read and write it)"


def hook_app(settings: PluginSettings | None = None) -> Starlette:
    """The app the hub mounts at /plugin (its lifespan opens the memory service and the sidecar)."""
    daemon = MemoryDaemon(settings or PluginSettings())
    ready: dict[str, HookMemory] = {}

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with daemon.backend(warm=False) as (hooks, _tg):
            ready["hooks"] = hooks
            yield

    async def hook(request: Request) -> JSONResponse:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST:
                return JSONResponse({"error": "the hook's request is too big"}, status_code=413)
        try:
            asked = parse_request(body)
            if not asked.get("namespace") or not isinstance(asked["namespace"], str):
                asked["namespace"] = daemon.memory.cortex_default_namespace
            if asked["event"] != "ping" and (why := _refused(request, asked["namespace"])):
                return JSONResponse({"error": why}, status_code=200)  # said as memory that is off, nothing done
            reply = await daemon.reply(asked, ready["hooks"])
        except PluginError as e:
            return JSONResponse({"error": str(e)}, status_code=200)  # the hook says it once; claude goes on
        return JSONResponse(reply)

    return Starlette(routes=[Route("/hook", hook, methods=["POST"])], lifespan=lifespan)
