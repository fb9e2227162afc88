"""The agent service over HTTP: JSON in and out, each session's events as server-sent events that any number
of clients follow (`Last-Event-ID` or `?after=N` replays what a client missed; `?types=` filters), and
coder/agentapi's routes per session so its clients work unchanged: at `/sessions/ID/agentapi/` (message,
messages, status, events), and but for `events` and `messages` (ours there) at `/sessions/ID/` too. Errors are
`{"error"}` with their status, agentapi's routes' problem+json (`{"title", "status", "detail"}`), and so is a
path no route has or a method a route does not take.

The hub's token check stands in front (the CLI puts it there): a scoped token's grant names the users
whose workspaces it may use (`request.state.grant.users`; no grant: any user)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from frobozz.memory import DatabaseError, unstorable

from ._agent import Agent
from ._events import KINDS, Status
from ._files import MAX_IMAGE_BYTES
from ._options import OPTIONS
from ._session import AgentSession
from .exceptions import AgentError, BusyError, ForbiddenError, InputError, SessionNotFoundError, TooLargeError

log = logging.getLogger("frobozz.agent")
MAX_BODY = 16 * 1024 * 1024
AGENT_TYPE = "claude"
Handler = Callable[[Request], Awaitable[Response]]


def _owners(request: Request) -> set[str] | None:
    grant = getattr(request.state, "grant", None)
    users = getattr(grant, "users", None) if grant is not None else None
    return None if grant is None or users is None or "*" in users else set(users)


def _token(request: Request) -> str | None:
    """The name of the caller's scoped token (never its secret); None: not scoped."""
    grant = getattr(request.state, "grant", None)
    return str(grant.name) if grant is not None else None


async def _body(request: Request) -> dict[str, Any]:
    too_large = TooLargeError(
        f"the request is larger than {MAX_BODY} bytes ({MAX_BODY // 2**20} MiB), the most it may be"
    )
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 12 or int(declared) > MAX_BODY):
        raise too_large
    data = bytearray()
    async for chunk in request.stream():  # (kept only up to the limit, whatever the body says of its length)
        data += chunk
        if len(data) > MAX_BODY:
            raise too_large
    raw = bytes(data)
    try:
        data = json.loads(raw or b"{}")
    except ValueError as e:
        raise InputError(f"the body is not JSON: {e}") from e
    except RecursionError:
        raise InputError("the body nests too deep") from None
    if not isinstance(data, dict):
        raise InputError("the body is a JSON object")
    if _unstorable_in(data):  # the database refuses such text: it was said as the database's failure (a 503)
        raise InputError(
            "the body holds a NUL (\\u0000) or an unpaired \\ud800-\\udfff escape, which no text here may hold"
        )
    return data


def _unstorable_in(value: object) -> bool:
    """Whether any text in a parsed body (keys too) is `unstorable`; a loop, not recursion: as deep as JSON nests."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if unstorable(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _error(status: int, title: str, detail: str, problem: bool, headers: Mapping[str, str] | None = None) -> Response:
    """An error as the API says them, `{error}`, or as agentapi's routes do (problem+json)."""
    if problem:
        return JSONResponse(
            {"title": title, "status": status, "detail": detail},
            status_code=status,
            media_type="application/problem+json",
            headers=headers,
        )
    return JSONResponse({"error": detail}, status_code=status, headers=headers)


def _json(handler: Handler, problem: bool = False) -> Handler:
    """Errors the agent raises on purpose as `{error}` (agentapi's routes: problem+json) with their status; a
    database that is away is a 503 that says so (the pool reconnects on its own once it is back)."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except (AgentError, DatabaseError) as e:
            status = e.status if isinstance(e, AgentError) else 503
            return _error(status, type(e).__name__, str(e), problem)

    return wrapped


async def _unrouted(request: Request, exc: Exception) -> Response:
    """A path no route has (a session id with a `/` in it, `..%2F..`, say) or a method a route does not take, in
    the shape of the routes around it: agentapi's under `/agentapi`, else the API's own."""
    assert isinstance(exc, HTTPException)
    headers = exc.headers
    if exc.status_code == 404:
        detail = f"nothing is at {request.url.path[:200]}"
    elif exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed(request)}
        detail = f"{request.method} is not taken here (only {headers['Allow']})"
    else:
        detail = str(exc.detail)
    problem = "agentapi" in request.url.path.split("/")
    return _error(exc.status_code, type(exc).__name__, detail, problem, headers)


def _allowed(request: Request) -> str:
    """Every method some route takes at this path: a path served by two routes (`GET` and `POST /sessions`)
    answered 405 naming the first one's only."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] is Match.PARTIAL:
            methods |= route.methods
    return ", ".join(sorted(methods))


class _Events(EventSourceResponse):
    """An SSE response that ends as a complete response when the server stops. sse_starlette, told the server is
    stopping, cancels the stream and returns without the body's end: uvicorn logged "ASGI callable returned
    without completing response" for each client, which read a cut-off body (not a stream that ended, after which
    an EventSource reconnects, with its Last-Event-ID, to whichever instance is there)."""

    def __init__(self, content: AsyncIterator[dict[str, Any]]) -> None:
        super().__init__(content, ping=15, send_timeout=30)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = ended = False

        async def sending(message: Message) -> None:
            nonlocal started, ended
            started = started or message["type"] == "http.response.start"
            ended = ended or (message["type"] == "http.response.body" and not message.get("more_body", False))
            await send(message)

        await super().__call__(scope, receive, sending)
        if started and not ended:  # (a client gone meanwhile: uvicorn sends nothing more to it)
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _event_number(raw: str) -> int:
    """`Last-Event-ID` or `?after=`: an event number (ASCII digits, as many as a 64-bit number has at most)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) >= 2**63:
        raise InputError("Last-Event-ID and ?after= are event numbers (whole numbers from 0)")
    return int(raw)


def _update(n: int, message: dict[str, Any]) -> dict[str, str]:
    """agentapi's message_update event for one message of the conversation."""
    return {
        "id": str(n),
        "event": "message_update",
        "data": json.dumps(
            {"id": message["id"], "message": message["content"], "role": message["role"], "time": message["time"]}
        ),
    }


class _Stopped:
    """Once the agent is stopping, every request is a 503; one that has stopped on a failure of its own says
    why: its tasks (leases kept, other instances heard) are gone, and another instance takes its sessions up."""

    def __init__(self, app: ASGIApp, agent: Agent) -> None:
        self.app, self.agent = app, agent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        failure = self.agent.failure
        if scope["type"] == "http" and (failure is not None or self.agent.closing):
            said = f"has stopped: {type(failure).__name__}: {failure}" if failure is not None else "is stopping"
            await JSONResponse({"error": f"the agent service {said}"}, status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(agent: Agent, *, on_failure: Callable[[Exception], object] | None = None) -> Starlette:
    """The API over `agent`, which the app's lifespan opens and closes. `on_failure` is called (with what
    failed) once the agent has stopped on a failure of its own: the host stops serving then, as the CLI does
    (exit status 1), or every request is a 503 that says why."""

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
        session_id = await agent.create_session(
            workspace, history=body.get("history"), attached=body.get("attached"), token=_token(request), **options
        )
        live = await agent.session(session_id)
        return JSONResponse({"session_id": session_id, "workspace": str(live.workspace.path)}, status_code=201)

    async def listing(request: Request) -> Response:
        return JSONResponse({"sessions": await agent.sessions(_owners(request))})

    async def one(request: Request) -> Response:
        session = await session_of(request)
        if request.method == "DELETE":
            await agent.close_session(session.id)
            return Response(status_code=204)
        return JSONResponse(await agent.describe(session))

    async def interrupt(request: Request) -> Response:
        await agent.interrupt(request.path_params["session_id"], owners=_owners(request))
        return JSONResponse({"ok": True})

    async def message(request: Request) -> Response:
        session = await session_of(request)
        body = await _body(request)
        for key in ("images", "files"):
            if body.get(key) is not None and not isinstance(body[key], list):
                raise InputError(f"{key} is a list")
        return JSONResponse(
            {
                "message_id": await agent.post_message(
                    session, body.get("text"), images=body.get("images"), files=body.get("files")
                )
            },
            status_code=202,
        )

    async def upload(request: Request) -> Response:
        await session_of(request)  # (a session that is not there, or not this token's: nothing read)
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_IMAGE_BYTES:
                raise TooLargeError(
                    f"the file is larger than {MAX_IMAGE_BYTES} bytes "
                    f"({MAX_IMAGE_BYTES // 2**20} MB), the most an image may be"
                )
        return JSONResponse(
            await agent.add_file(
                request.path_params["session_id"],
                request.headers.get("content-type"),
                bytes(data),
                owners=_owners(request),
            ),
            status_code=201,
        )

    async def answers(request: Request) -> Response:
        body = await _body(request)
        if not isinstance(body.get("answers"), dict) or not body["answers"]:
            raise InputError("answers are an object: each question's text, and the answer chosen")
        await agent.answer(
            request.path_params["session_id"],
            str(body.get("question_id", "")),
            body["answers"],
            owners=_owners(request),
        )
        return JSONResponse({"ok": True})

    async def events(request: Request) -> Response:
        session = await session_of(request)
        after = _event_number(request.headers.get("last-event-id") or request.query_params.get("after") or "0")
        if after > session.relay.last_seq:  # (this instance may not have read the newest yet: the database has)
            last = await agent.last_event(session)
            if after > last:
                raise InputError(
                    f"there is no event {after} in this session: its events go up to {last} (a client passes the "
                    "number of the last event it saw, to be given those after it)"
                )
        # (empty items and spaces, as a list built with a trailing comma has, are nothing: none at all, no filter)
        kinds = {kind.strip() for kind in request.query_params.get("types", "").split(",")} - {""} or None
        if kinds is not None and kinds - set(KINDS):
            raise InputError(f"unknown event types: {', '.join(sorted(kinds - set(KINDS)))}; known: {', '.join(KINDS)}")

        async def stream() -> AsyncIterator[dict[str, Any]]:
            async for logged in session.relay.follow(after, kinds):
                yield {
                    "id": str(logged.seq),
                    "event": logged.event.kind,
                    "data": json.dumps(logged.event.data(), default=str),
                }

        return _Events(stream())

    async def history(request: Request) -> Response:
        return JSONResponse(
            {"changes": await agent.changes(request.path_params["session_id"], owners=_owners(request))}
        )

    async def tools(request: Request) -> Response:
        session = await session_of(request)
        return JSONResponse({"tools": await agent.tool_calls(session.id)})

    # -- coder/agentapi's routes, per session ---------------------------------------------------------
    async def api_message(request: Request) -> Response:
        session = await session_of(request)
        body = await _body(request)
        if body.get("type") != "user":
            raise InputError("only 'user' messages: there is no terminal to send raw keystrokes to")
        if session.busy:  # (and, as two requests may come at once, checked again as the message is kept)
            raise BusyError("the agent is running; send when its status is stable")
        await agent.post_message(session, body.get("content"), alone=True)
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
            yield {
                "id": str(n),
                "event": "status_change",
                "data": json.dumps({"agent_type": AGENT_TYPE, "status": api_state(session)}),
            }
            async for logged in session.relay.follow(session.relay.last_seq, {"status"}):
                assert isinstance(logged.event, Status)
                if logged.event.state == "idle":
                    for m in (await agent.messages(session.id))[-2:]:
                        n += 1
                        yield _update(n, m)
                n += 1
                yield {
                    "id": str(n),
                    "event": "status_change",
                    "data": json.dumps(
                        {"agent_type": AGENT_TYPE, "status": "stable" if logged.event.state == "idle" else "running"}
                    ),
                }

        return _Events(stream())

    # -- notifications: Web Push subscriptions and webhooks -----------------------------------------------
    def user_of(request: Request, body: dict[str, Any]) -> str:
        user, owners = body.get("user"), _owners(request)
        if not isinstance(user, str) or not user or len(user) > 64 or "/" in user or user.startswith("."):
            raise InputError("user is the name of the user whose sessions it is for")
        if owners is not None and user not in owners:
            raise ForbiddenError(f"this token may not act for {user[:64]!r}")
        return user

    async def push_key(request: Request) -> Response:
        assert agent.notifier is not None
        return JSONResponse({"public_key": (await agent.notifier.vapid())[1]})

    async def push_subscribe(request: Request) -> Response:
        body = await _body(request)
        assert agent.notifier is not None
        session_id = body.get("session_id")
        if session_id is not None:
            owner = (await agent.session(str(session_id), owners=_owners(request))).record.owner
        else:
            owner = user_of(request, body)
        subscription_id = await agent.notifier.subscribe(owner, session_id, body.get("subscription"))
        return JSONResponse({"id": subscription_id}, status_code=201)

    async def push_unsubscribe(request: Request) -> Response:
        assert agent.notifier is not None
        owners = _owners(request)
        if not await agent.notifier.unsubscribe(request.path_params["item"], sorted(owners) if owners else None):
            raise SessionNotFoundError("no such subscription")
        return Response(status_code=204)

    def token_of(request: Request, body: dict[str, Any]) -> str:
        """The token a webhook is for: a scoped token registers for itself only; the hub's own token (no scope),
        which acts for every user, for any token."""
        token, mine = body.get("token"), _token(request)
        if not isinstance(token, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}", token) or "user" in body:
            raise InputError("token is the name of the token whose sessions it is for (and then no user)")
        if mine is not None and token != mine:
            raise ForbiddenError(f"token {mine!r} may register a webhook for itself only, not for another token")
        return token

    async def webhooks(request: Request) -> Response:
        assert agent.notifier is not None
        owners = _owners(request)
        if request.method == "GET":
            return JSONResponse(
                {"webhooks": await agent.notifier.webhooks(sorted(owners) if owners else None, _token(request))}
            )
        body = await _body(request)
        if "token" in body:
            made = await agent.notifier.add_webhook(None, body.get("url"), token=token_of(request, body))
        else:
            made = await agent.notifier.add_webhook(user_of(request, body), body.get("url"))
        return JSONResponse(made, status_code=201)

    async def webhook(request: Request) -> Response:
        assert agent.notifier is not None
        owners = _owners(request)
        item, mine = request.path_params["item"], sorted(owners) if owners else None
        if request.method == "POST":
            resumed = await agent.notifier.resume_webhook(item, mine, _token(request))
            if resumed is None:
                raise SessionNotFoundError("no such webhook")
            return JSONResponse({"ok": True, **resumed})
        if not await agent.notifier.remove_webhook(item, mine, _token(request)):
            raise SessionNotFoundError("no such webhook")
        return Response(status_code=204)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            async with agent:
                yield
        finally:
            if agent.failure is not None and on_failure is not None:
                try:
                    on_failure(agent.failure)
                except Exception:  # (the agent's failure is the one to raise)
                    log.exception("the agent service's on_failure failed")

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
        Route(f"{base}/changes", _json(history), methods=["GET"]),
        Route(f"{base}/files", _json(upload), methods=["POST"]),
    ]
    routes += [
        Route("/push/key", _json(push_key), methods=["GET"]),
        Route("/push/subscriptions", _json(push_subscribe), methods=["POST"]),
        Route("/push/subscriptions/{item}", _json(push_unsubscribe), methods=["DELETE"]),
        Route("/webhooks", _json(webhooks), methods=["GET", "POST"]),
        Route("/webhooks/{item}", _json(webhook), methods=["DELETE"]),
        Route("/webhooks/{item}/resume", _json(webhook), methods=["POST"]),
    ]
    # the conversation: the API's own (its errors are the API's), and agentapi's `messages` (agentapi's errors)
    routes.append(Route(f"{base}/messages", _json(api_messages), methods=["GET"]))
    routes.append(Route(f"{base}/agentapi/messages", _json(api_messages, problem=True), methods=["GET"]))
    for prefix in (base, f"{base}/agentapi"):  # an agentapi client's base URL: /sessions/ID/agentapi (all four)
        routes += [
            Route(f"{prefix}/message", _json(api_message, problem=True), methods=["POST"]),
            Route(f"{prefix}/status", _json(api_status, problem=True), methods=["GET"]),
        ]
    routes.append(Route(f"{base}/agentapi/events", _json(api_events, problem=True), methods=["GET"]))
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_Stopped, agent=agent)],
        exception_handlers={HTTPException: _unrouted},
    )


__all__ = ["create_app"]
