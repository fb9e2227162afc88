"""The hub's token check, in front of everything it serves but the health check: MCP clients send the
token as `Authorization: Bearer TOKEN`; a browser (the web view) signs in once, with the token in a form
or in the link the hub prints (`/?token=…`), and then carries it in an HttpOnly, SameSite=Strict cookie.

One token (`BearerToken`) may do anything. Scoped tokens (`ScopedTokens`, `FROBOZZ_HUB_TOKENS`) each
have a grant: a server outside it is refused here, the tools check namespaces (`granted`), and the web
view (any path that is not a server's) needs "web" among the grant's servers and reads the grant from
`request.state.grant`. Both are pure ASGI: streams pass untouched."""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable
from email.utils import formatdate
from html import escape
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, quote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from ._configs import MIN_TOKEN_CHARS
from ._grants import Grant, find_grant, granted

OPEN_PATHS = frozenset({"/healthz"})  # for load balancers' health checks
COOKIE = "frobozz_token"
LOGIN = "/login"
COOKIE_DAYS = 30  # a browser stays signed in this long, across restarts, unless the hub's token changes
_MAX_FORM = 4096
SIGN_IN = "Sign in with this hub's token to see this page."
LINK = (
    "The link you followed carries a token this hub does not take: it prints a new link each time it starts (unless "
    "FROBOZZ_HUB_TOKEN keeps one), so use the one it printed last, or sign in here."
)
STALE = "Your browser kept a token that this hub no longer takes (it was restarted with another): sign in again."


class _Gate:
    """Finds the caller's token (header, cookie, or the sign-in form or link), asks `admit` whether it may
    have this path, and passes the request on, or refuses it: JSON for programs, a sign-in page for
    browsers."""

    def __init__(self, app: ASGIApp, admit: Callable[[str, str], tuple[bool, Grant | None, str]]) -> None:
        self.app, self.admit = app, admit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if scope["path"] == LOGIN and scope["method"] == "POST":
            await self._login(scope, receive, send)
            return
        linked = _query_token(scope)
        if linked is not None and scope["method"] == "GET":  # the printed link: keep it as a cookie, drop it
            allowed, _, _ = self.admit(linked, "")
            if allowed:
                await _redirect(send, _without_token(scope), linked)
                return
        token = _token(scope)
        allowed, grant, why = self.admit(token, scope["path"]) if token is not None else (False, None, "")
        if not allowed:
            if why:  # a known token, outside its grant
                await _refuse(scope, send, 403, why, human=f"Your token does not open this page: {why}.")
            else:
                await _refuse(
                    scope,
                    send,
                    401,
                    "unauthorized: send the hub's token as 'Authorization: Bearer TOKEN'",
                    human=STALE if token else LINK if linked is not None else SIGN_IN,
                )
            return
        scope.setdefault("state", {})["grant"] = grant
        with granted(grant):
            await self.app(scope, receive, send)

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_FORM:
                await _refuse(scope, send, 413, "the sign-in form is too large")
                return
            if not message.get("more_body"):
                break
        form = parse_qs(body.decode("latin-1"))
        token, next_path = form.get("token", [""])[0].strip(), form.get("next", ["/"])[0]
        allowed, _, _ = self.admit(token, "") if token else (False, None, "")
        if not allowed:
            await _refuse(
                scope,
                send,
                401,
                "that is not this hub's token",
                next_path=next_path,
                human="That is not this hub's token. Check it (it is long: copy it whole) and try again.",
            )
            return
        await _redirect(send, next_path, token)


def BearerToken(app: ASGIApp, token: str) -> ASGIApp:  # a middleware, named as one
    """One token for everything."""
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"the hub's bearer token must be at least {MIN_TOKEN_CHARS} characters")
    expected = token.encode()

    def admit(given: str, _: str) -> tuple[bool, Grant | None, str]:
        return hmac.compare_digest(given.encode(), expected), None, ""

    return _Gate(app, admit)


def ScopedTokens(
    app: ASGIApp, grants: list[Grant], servers: frozenset[str] | set[str], *, only: str | None = None
) -> ASGIApp:
    """`FROBOZZ_HUB_TOKENS`: the caller's token picks its grant; `servers` are the paths that are MCP servers
    (`/servers` lists them to any token; the rest is the web view, which the grant must name as "web");
    `only`: every path is that part (an app served alone: the agent service)."""

    def admit(given: str, path: str) -> tuple[bool, Grant | None, str]:
        grant = find_grant(grants, given)
        if grant is None:
            return False, None, ""
        first = path.strip("/").split("/")[0]
        part = only or (first if first in servers else "" if first == "servers" else "web")
        if path and part and not grant.may_use(part):
            return (
                False,
                grant,
                (
                    f"token {grant.name!r} may not use the {part} "
                    + ("view" if part == "web" else "service" if part == "agent" else "server")
                    + f" (it may use: {', '.join(grant.servers) or 'none'})"
                ),
            )
        return True, grant, ""

    return _Gate(app, admit)


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return dict(scope["headers"])


def _token(scope: Scope) -> str | None:
    """The Authorization header's token ('' when it is there but not `Bearer …`), else the cookie's."""
    headers = _headers(scope)
    if b"authorization" in headers:
        given = headers[b"authorization"].decode("latin-1")
        return given[7:] if given[:7].lower() == "bearer " else ""  # (a scheme's name is case-insensitive)
    try:
        jar = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
    except CookieError:
        return None
    return jar[COOKIE].value if COOKIE in jar else None


def _query_token(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


def _without_token(scope: Scope) -> str:
    """The address asked for, as it was sent (still percent-encoded: decoded, `/runs/a%20b` was a path with a space,
    which sent the browser to "/", and `%3F` became a query), without the token."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) and raw else quote(scope["path"])
    query = [
        (k, v)
        for k, vs in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()
        for v in vs
        if k != "token"
    ]
    return scope.get("root_path", "") + path + (f"?{urlencode(query)}" if query else "")


def _this_site(path: str) -> str:
    """`path` if it is a page of this site, else "/": after signing in, a browser goes only here. Browsers take
    `/\\host` (and `//host`, or a tab or newline in the way) for another site: a path that was only checked
    for `//` sent a signed-in browser to `/\\evil.example/`."""
    if not path.startswith("/") or path[1:2] in ("/", "\\") or "\\" in path:
        return "/"
    if any(c.isspace() or not c.isprintable() for c in path):
        return "/"
    return path


async def _redirect(send: Send, location: str, token: str) -> None:
    location = _this_site(location)
    seconds = COOKIE_DAYS * 86400
    expires = formatdate(time.time() + seconds, usegmt=True)
    cookie = f"{COOKIE}={token}; Path=/; Max-Age={seconds}; Expires={expires}; HttpOnly; SameSite=Strict"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def _wants_html(scope: Scope) -> bool:
    return scope["method"] in ("GET", "POST") and b"text/html" in _headers(scope).get(b"accept", b"")


async def _refuse(
    scope: Scope, send: Send, status: int, message: str, *, next_path: str | None = None, human: str | None = None
) -> None:
    """JSON with `message` for a program; for a browser, a page that says it in words for people (`human`)."""
    if _wants_html(scope):
        headers = [(b"content-type", b"text/html; charset=utf-8")]
        body = _sign_in(human or message, next_path or _without_token(scope), status).encode()
    else:
        headers = [(b"content-type", b"application/json")]
        body = json.dumps({"error": message}).encode()
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="frobozz"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _sign_in(message: str, next_path: str, status: int) -> str:
    """The page a browser gets instead: what went wrong, and (for a missing token) a form to give it, in the
    web view's colours (its stylesheet is behind this gate, so the few rules it needs are here)."""
    form = (
        ""
        if status != 401
        else (
            f'<form method="post" action="{LOGIN}"><input type="hidden" name="next" value="{escape(next_path)}">'
            '<label for="token">Hub token</label><input id="token" type="password" name="token" '
            'autocomplete="current-password" spellcheck="false" required autofocus>'
            '<button type="submit">Sign in</button></form>'
            "<p class=help>Where to find it: <code>frobozz serve all --http</code> (or <code>frobozz web</code>) "
            "printed it when it started, with a link that signs you in at once. When the hub was started with "
            "<code>FROBOZZ_HUB_TOKEN</code> set, it is that; with scoped tokens, it is the one "
            "<code>frobozz hub-token</code> gave you.</p>"
            f"<p class=help>You stay signed in on this browser for {COOKIE_DAYS} days.</p>"
        )
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport "
        "content='width=device-width, initial-scale=1'><title>Frobozz: sign in</title><style>"
        + _STYLE
        + "</style></head><body><header>Frobozz</header><main>"
        f"<h1>{'Sign in' if status == 401 else 'Not for this token'}</h1>"
        f'<p id="refused" role="alert">{escape(message)}</p>{form}</main></body></html>'
    )


_STYLE = (
    "*{box-sizing:border-box}body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;"
    "color:#1d2327;background:#f5f7f9}header{padding:.6rem 1rem;background:#1d2327;color:#fff;font-weight:700;"
    "letter-spacing:.04em}main{max-width:30rem;margin:2.5rem auto;padding:1.25rem 1.5rem;background:#fff;"
    "border:1px solid #d9dee3;border-radius:8px}h1{font-size:1.4rem;margin:0 0 .6rem}#refused{margin:0 0 1rem}"
    "form{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center}label{width:100%;font-size:.85rem;"
    "color:#66707a}input{flex:1 1 14rem;min-width:0;font:inherit;padding:.4rem .5rem;border:1px solid "
    "#d9dee3;border-radius:6px}button{font:inherit;padding:.4rem .9rem;border:1px solid #2a7ab0;"
    "border-radius:6px;background:#2a7ab0;color:#fff;cursor:pointer}.help{color:#66707a;font-size:.9rem}"
    "code{font-size:.85em;background:#f5f7f9;padding:0 .2rem;border-radius:3px;white-space:nowrap}"
)
