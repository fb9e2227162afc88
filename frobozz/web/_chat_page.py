"""The chat page: a client of the agent service's HTTP API (mounted at /agent by `serve all --http
--workspaces ROOT`), written in plain JavaScript. Text streams in, tool calls are folded, questions are
buttons; any number of tabs on one session follow the same event relay, so they stay in step."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from ._web import web_of

_SESSION = re.compile(r"[0-9a-f]{1,64}")


async def chat_page(request: Request) -> HTMLResponse:
    session = request.query_params.get("session", "")
    if session and not _SESSION.fullmatch(session):
        session = ""
    web = web_of(request)
    return web.page(request, "chat.html", session=session, agent=web.settings.web_agent_path, served=web.agent_served)


routes = [Route("/chat", chat_page, name="chat")]
