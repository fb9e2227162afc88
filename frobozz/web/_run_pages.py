"""The runs pages: the table of runs (with the leaderboard when runs are in Postgres), and one run: its
transcript turn by turn, score chart and map, updated live over server-sent events while it plays."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from frobozz.games import GameMap
from frobozz.runner import STATUSES, RunNotFoundError, TurnRecord

from ._chart import score_chart
from ._map import layout
from ._runs import RunView
from ._waterfall import waterfall
from ._web import Web, no_nul, web_of

TURN_LIMIT = 2**31  # turns are numbered in an int4 in the database: `after` is one below this
FILTERS = ("game", "model", "mode", "player", "status")


async def runs_page(request: Request) -> HTMLResponse:
    web = web_of(request)
    chosen = {name: no_nul(request.query_params.get(name) or "", f"the {name} filter") or None for name in FILTERS}
    if chosen["status"] is not None and chosen["status"] not in STATUSES:
        raise HTTPException(400, f"status must be one of: {', '.join(STATUSES)}")
    everything = await web.runs.rows()
    rows = await web.runs.rows(**chosen) if any(chosen.values()) else everything
    choices = {name: sorted({getattr(r, name) for r in everything if getattr(r, name)}) for name in FILTERS}
    return web.page(
        request,
        "runs.html",
        rows=rows,
        chosen=chosen,
        choices=choices,
        leaderboard=await web.runs.leaderboard(),
        notice=web.runs.database_error,
    )


async def _view(web: Web, run_id: str, after: int = 0) -> RunView:
    try:
        return await web.runs.run(run_id, after=after)
    except RunNotFoundError as e:
        raise HTTPException(404, str(e)) from None


async def _figures(web: Web, request: Request, view: RunView, turns: list[TurnRecord]) -> str:
    """The score chart and the map, as the page shows them (rendered again as turns arrive). The map's layout
    is worked out in a thread: for a whole game it takes seconds, the other pages must not wait."""
    current = turns[-1].location if turns else None
    start = [(None, view.info.start_location)]  # the room the game began in, before the first command
    explored = await anyio.to_thread.run_sync(
        layout, GameMap.from_path([*start, *((t.command, t.location) for t in turns)]), current
    )
    template = web.templates.get_template("_figures.html")
    return template.render(request=request, chart=score_chart(turns, view.info.max_score), map=explored, info=view.info)


def _render(web: Web, request: Request, name: str, **context: Any) -> str:
    return web.templates.get_template(name).render(request=request, **context)


async def run_page(request: Request) -> HTMLResponse:
    web = web_of(request)
    view = await _view(web, request.path_params["run_id"])
    traces = waterfall(await web.runs.spans(view.info.run_id))
    return web.page(
        request,
        "run.html",
        info=view.info,
        turns=view.turns,
        live=view.live,
        traces=traces,
        figures=await _figures(web, request, view, view.turns),
        last=view.turns[-1].turn if view.turns else 0,
        notice=web.runs.database_error,
    )


async def run_events(request: Request) -> Response:
    """Server-sent events for a run's page: `turn` (a turn's HTML, its number as the event id), `figures` (the
    chart and map again), `status` (the run's header), and `end` once the run has stopped. A reconnecting
    browser sends the last id it saw and gets only what came after."""
    web = web_of(request)
    run_id = request.path_params["run_id"]
    try:
        after = int(request.headers.get("last-event-id") or request.query_params.get("after") or 0)
    except ValueError:
        raise HTTPException(400, "after must be a turn number") from None
    if not 0 <= after < TURN_LIMIT:  # (the database's turn is an int4: a number past it was refused by asyncpg)
        raise HTTPException(400, f"after must be a turn number from 0 to {TURN_LIMIT - 1}")
    everything = await _view(web, run_id)  # 404 now, before the stream starts
    turns = [t for t in everything.turns if t.turn <= after]

    async def events() -> AsyncIterator[dict[str, str]]:
        async for view in web.runs.follow(run_id, after):
            for turn in view.turns:
                turns.append(turn)
                yield {"event": "turn", "id": str(turn.turn), "data": _render(web, request, "_turn.html", t=turn)}
            yield {"event": "figures", "data": await _figures(web, request, view, turns)}
            yield {
                "event": "status" if view.live else "end",
                "data": _render(web, request, "_status.html", info=view.info, live=view.live),
            }

    return EventSourceResponse(events(), ping=15, send_timeout=30)


async def trace_page(request: Request) -> HTMLResponse:
    """A claude session's traces (a chat's, an agent session's: the agent service's sessions say their claude
    session id) as waterfalls, from the spans kept in Postgres."""
    web = web_of(request)
    session_id = request.path_params["session_id"]
    if len(session_id) > 100 or "\0" in session_id:
        raise HTTPException(400, "that is not a session id")
    traces = waterfall(await web.runs.spans(session_id=session_id))
    return web.page(request, "trace.html", session_id=session_id, traces=traces, notice=web.runs.database_error)


routes = [
    Route("/", runs_page, name="runs"),
    Route("/traces/{session_id}", trace_page, name="trace"),
    Route("/runs/{run_id}", run_page, name="run"),
    Route("/runs/{run_id}/events", run_events, name="run_events"),
]
