"""The agent service over HTTP: JSON in and out, each session's events as server-sent events that any number
of clients follow (`Last-Event-ID` or `?after=N` replays what a client missed; `?types=` filters), and
coder/agentapi's routes per session so its clients work unchanged: at `/sessions/ID/agentapi/` (message,
messages, status, events), and but for `events` (ours there) at `/sessions/ID/` too.

The hub's token check stands in front (the CLI puts it there): a scoped token's grant names the users
whose workspaces it may use (`request.state.grant.users`; no grant: any user)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from frobozz.memory import DatabaseError

from ._agent import OPTIONS, Agent
from ._events import KINDS, Status
from ._session import AgentSession
from .exceptions import AgentError, BusyError, ForbiddenError, InputError

MAX_BODY = 16 * 1024 * 1024
AGENT_TYPE = "claude"
Handler = Callable[[Request], Awaitable[Response]]


def _owners(request: Request) -> set[str] | None:
    grant = getattr(request.state, "grant", None)
    users = getattr(grant, "users", None) if grant is not None else None
    return None if grant is None or users is None or "*" in users else set(users)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise InputError(f"the request is larger than {MAX_BODY} bytes")
    try:
        data = json.loads(raw or b"{}")
    except ValueError as e:
        raise InputError(f"the body is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise InputError("the body is a JSON object")
    return data


def _json(handler: Handler, problem: bool = False) -> Handler:
    """Errors the agent raises on purpose as `{error}` (agentapi's routes: problem+json) with their status; a
    database that is away is a 503 that says so (the pool reconnects on its own once it is back)."""
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except (AgentError, DatabaseError) as e:
            status = e.status if isinstance(e, AgentError) else 503
            if problem:
                return JSONResponse({"title": type(e).__name__, "status": status, "detail": str(e)},
                                    status_code=status, media_type="application/problem+json")
            return JSONResponse({"error": str(e)}, status_code=status)
    return wrapped


def _update(n: int, message: dict[str, Any]) -> dict[str, str]:
    """agentapi's message_update event for one message of the conversation."""
    return {"id": str(n), "event": "message_update", "data": json.dumps(
        {"id": message["id"], "message": message["content"], "role": message["role"], "time": message["time"]})}


def create_app(agent: Agent) -> Starlette:
    """The API over `agent`, which the app's lifespan opens and closes."""

    async def session_of(request: Request) -> AgentSession:
        return await agent.session(request.path_params["session_id"], owners=_owners(request))

    async def create(request: Request) -> Response:
        body = await _body(request)
        workspace = body.get("workspace")
        owners = _owners(request)
        if owners is not None and (not isinstance(workspace, str) or workspace.split("/")[0] not in owners):
            raise ForbiddenError(f"this token may not use {str(workspace)[:100]!r}")
        options = {k: body[k] for k in OPTIONS if body.get(k) is not None}
        grant = getattr(request.state, "grant", None)
        namespace = body["memory"].get("namespace") if isinstance(body.get("memory"), dict) else None
        if grant is not None and isinstance(namespace, str) and not grant.may(namespace, write=True):
            raise ForbiddenError(f"this token may not write to the memory namespace {namespace[:100]!r}")
        session_id = await agent.create_session(workspace, history=body.get("history"), attached=body.get("attached"),
                                                **options)
        live = await agent.session(session_id)
        return JSONResponse({"session_id": session_id, "workspace": str(live.workspace.path)}, status_code=201)

    async def listing(request: Request) -> Response:
        return JSONResponse({"sessions": await agent.sessions(_owners(request))})

    async def one(request: Request) -> Response:
        session = await session_of(request)
        if request.method == "DELETE":
            await agent.close_session(session.id)
            return Response(status_code=204)
        return JSONResponse(session.describe())

    async def interrupt(request: Request) -> Response:
        await (await session_of(request)).interrupt()
        return JSONResponse({"ok": True})

    async def message(request: Request) -> Response:
        session = await session_of(request)
        body = await _body(request)
        return JSONResponse({"message_id": agent.post_message(session, body.get("text"))}, status_code=202)

    async def answers(request: Request) -> Response:
        session = await session_of(request)
        body = await _body(request)
        if not isinstance(body.get("answers"), dict) or not body["answers"]:
            raise InputError("answers are an object: each question's text, and the answer chosen")
        session.answer(str(body.get("question_id", "")), body["answers"])
        return JSONResponse({"ok": True})

    async def events(request: Request) -> Response:
        session = await session_of(request)
        after = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        if not after.isdigit():
            raise InputError("Last-Event-ID and ?after= are event numbers")
        kinds = None
        if request.query_params.get("types"):
            kinds = set(request.query_params["types"].split(","))
            if kinds - set(KINDS):
                raise InputError(f"unknown event types: {', '.join(sorted(kinds - set(KINDS)))}; "
                                 f"known: {', '.join(KINDS)}")

        async def stream() -> AsyncIterator[dict[str, Any]]:
            async for logged in session.relay.follow(int(after), kinds):
                yield {"id": str(logged.seq), "event": logged.event.kind,
                       "data": json.dumps(logged.event.data(), default=str)}

        return EventSourceResponse(stream(), ping=15, send_timeout=30)

    async def tools(request: Request) -> Response:
        session = await session_of(request)
        return JSONResponse({"tools": await agent.tool_calls(session.id)})

    # -- coder/agentapi's routes, per session ---------------------------------------------------------
    async def api_message(request: Request) -> Response:
        session = await session_of(request)
        body = await _body(request)
        if body.get("type") != "user":
            raise InputError("only 'user' messages: there is no terminal to send raw keystrokes to")
        if session.busy:
            raise BusyError("the agent is running; send when its status is stable")
        agent.post_message(session, body.get("content"))
        return JSONResponse({"ok": True})

    async def api_messages(request: Request) -> Response:
        session = await session_of(request)
        return JSONResponse({"messages": await agent.messages(session.id)})

    def api_state(session: AgentSession) -> str:
        return "running" if session.busy or session.state in ("streaming", "waiting") else "stable"

    async def api_status(request: Request) -> Response:
        return JSONResponse({"agent_type": AGENT_TYPE, "status": api_state(await session_of(request))})

    async def api_events(request: Request) -> Response:
        session = await session_of(request)

        async def stream() -> AsyncIterator[dict[str, Any]]:
            n = 0
            for m in await agent.messages(session.id):
                n += 1
                yield _update(n, m)
            n += 1
            yield {"id": str(n), "event": "status_change",
                   "data": json.dumps({"agent_type": AGENT_TYPE, "status": api_state(session)})}
            async for logged in session.relay.follow(session.relay.last_seq, {"status"}):
                assert isinstance(logged.event, Status)
                if logged.event.state == "idle":
                    for m in (await agent.messages(session.id))[-2:]:
                        n += 1
                        yield _update(n, m)
                n += 1
                yield {"id": str(n), "event": "status_change", "data": json.dumps(
                    {"agent_type": AGENT_TYPE, "status": "stable" if logged.event.state == "idle" else "running"})}

        return EventSourceResponse(stream(), ping=15, send_timeout=30)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with agent:
            yield

    base = "/sessions/{session_id}"
    routes = [
        Route("/sessions", _json(create), methods=["POST"]),
        Route("/sessions", _json(listing), methods=["GET"]),
        Route(base, _json(one), methods=["GET", "DELETE"]),
        Route(f"{base}/interrupt", _json(interrupt), methods=["POST"]),
        Route(f"{base}/messages", _json(message), methods=["POST"]),
        Route(f"{base}/answers", _json(answers), methods=["POST"]),
        Route(f"{base}/events", _json(events), methods=["GET"]),
        Route(f"{base}/tools", _json(tools), methods=["GET"]),
    ]
    for prefix in (base, f"{base}/agentapi"):  # an agentapi client's base URL: /sessions/ID/agentapi (all four)
        routes += [Route(f"{prefix}/message", _json(api_message, problem=True), methods=["POST"]),
                   Route(f"{prefix}/messages", _json(api_messages, problem=True), methods=["GET"]),
                   Route(f"{prefix}/status", _json(api_status, problem=True), methods=["GET"])]
    routes.append(Route(f"{base}/agentapi/events", _json(api_events, problem=True), methods=["GET"]))
    return Starlette(routes=routes, lifespan=lifespan)


__all__ = ["create_app"]
