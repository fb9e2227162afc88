"""The CLI's HTTP server: a part's own task that fails while it serves stops it with status 1 (uvicorn alone
would go on taking requests for a part that is gone); stopped as asked, it returns."""

from contextlib import asynccontextmanager
from functools import partial

import anyio
import httpx
import pytest
import typer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from frobozz.cli._server import FAILED, Server
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def app_with_a_part(*, swallowed: bool = False) -> Starlette:
    """An app whose lifespan runs a task of its own, which fails once /boom is asked for (`swallowed`: the
    lifespan catches the error, and so ends as if shut down)."""
    told: dict[str, anyio.Event] = {}

    @asynccontextmanager
    async def lifespan(_app: Starlette):
        told["boom"] = anyio.Event()

        async def part() -> None:
            await told["boom"].wait()
            raise RuntimeError("a bug in a part")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(part)
                yield
                tg.cancel_scope.cancel()  # (shut down as asked: the part is stopped)
        except* RuntimeError:
            if not swallowed:
                raise

    async def boom(_request: Request) -> PlainTextResponse:
        told["boom"].set()
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/boom", boom), Route("/", lambda _r: PlainTextResponse("up"))], lifespan=lifespan)


async def serving(server: Server, port: int, ended: list, *, swallowed: bool = False) -> None:
    """`server.run` in a thread (its own event loop, as in the command); how it ended into `ended`."""
    try:
        await anyio.to_thread.run_sync(server.run, app_with_a_part(swallowed=swallowed), "127.0.0.1", port)
        ended.append("returned")
    except (typer.Exit, SystemExit) as e:  # (SystemExit: uvicorn's own, when the port was taken meanwhile)
        ended.append(e.exit_code if isinstance(e, typer.Exit) else e.code)


async def up(client: httpx.AsyncClient) -> bool:
    try:
        return (await client.get("/")).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "swallowed by its lifespan"])
async def test_a_part_that_fails_while_serving_stops_the_server_with_status_1(swallowed):
    server, port, ended = Server(), free_port(), []
    async with anyio.create_task_group() as tg, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        tg.start_soon(partial(serving, server, port, ended, swallowed=swallowed))
        try:
            with anyio.fail_after(60):
                await eventually(lambda: up(client))
                assert (await client.get("/boom")).status_code == 200
                await eventually(lambda: ended)
        finally:
            if server._uvicorn is not None:  # (ended already, unless the test failed)
                server._uvicorn.should_exit = True
    assert ended == [1] and server.failure == FAILED  # (the line it prints: tests/agent/test_http.py's processes)


@pytest.mark.parametrize("forced", [False, True], ids=["asked", "forced (Ctrl-C twice)"])
async def test_a_server_stopped_as_asked_returns_and_reports_no_failure(forced):
    server, port, ended = Server(), free_port(), []
    async with anyio.create_task_group() as tg, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        tg.start_soon(serving, server, port, ended)
        try:
            with anyio.fail_after(60):
                await eventually(lambda: up(client))
        finally:
            if server._uvicorn is not None:  # as its signal handler does (twice: no lifespan shutdown asked)
                server._uvicorn.force_exit = forced
                server._uvicorn.should_exit = True
    assert ended == ["returned"] and server.failure is None
