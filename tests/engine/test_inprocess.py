"""In-process MCP servers through the real claude CLI: listed in init, called by the model, their results,
schemas and errors the same as the same server's over stdio; a bad message to one is a JSON-RPC error."""

import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from frobozz import _spans as S
from frobozz.engine import Engine, Restarted, Result, SystemInit
from frobozz.engine._inprocess import InProcessServers
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse, replies
from tests.engine.calc_server import create_server
from tests.engine.conftest import of, until

pytestmark = pytest.mark.anyio
CALLS = [("mcp__calc__add", {"numbers": [2, 40]}), ("mcp__calc__add", {"numbers": []}), ("mcp__calc__crash", {})]


async def play(make_options, **where):
    """Each call of CALLS in turn; what the model was told, the tools it was offered, and claude's init."""
    script = replies(*(Reply((ToolUse(name, args),)) for name, args in CALLS), "done", "and again")
    async with ScriptedModel(script) as model:
        tools = ["mcp__calc__add", "mcp__calc__crash"]
        async with Engine(make_options(model, allowed_tools=tools, **where)) as engine:
            await engine.start()
            await engine.wait_for_mcp(["calc"])  # a stdio server starts after claude does
            await engine.send("add things")
            events = await until(engine.events(), Result)
            await engine.send("still there?")
            await until(engine.events(), Result)  # a crashed tool did not take the server down
    told = [r.tool_results()[0] for r in model.requests[1:4]]
    offered = [t for t in model.requests[0].body["tools"] if t["name"].startswith("mcp__calc__")]
    return told, offered, of(events, SystemInit)[0]


async def test_an_in_process_server_is_listed_called_and_answers_as_over_stdio(make_options):
    told, offered, init = await play(make_options, in_process_servers={"calc": create_server()})
    [status] = [s for s in init.mcp_servers if s.name == "calc"]
    assert status.status == "connected" and "mcp__calc__add" in init.tools
    assert '"total":42' in str(told[0]["content"]).replace(" ", "") and not told[0].get("is_error")
    assert told[1]["is_error"] and "give at least one number" in str(told[1]["content"])
    assert told[2]["is_error"] and "Error executing tool crash" in str(told[2]["content"])  # its details stay here
    script = str(Path(__file__).parent / "calc_server.py")
    stdio = {"mcpServers": {"calc": {"command": sys.executable, "args": [script]}}}
    told_stdio, offered_stdio, _ = await play(make_options, mcp_config=stdio)
    assert offered == offered_stdio  # the same names, descriptions and schemas

    def same(results):
        return [(r["content"], r.get("is_error")) for r in results]

    assert same(told) == same(told_stdio)


async def test_a_bad_message_or_an_unknown_server_is_a_json_rpc_error_not_a_crash():
    servers = InProcessServers({"calc": create_server()})
    async with anyio.create_task_group() as tg:
        await tg.start(servers.serve)
        for junk in ({}, {"jsonrpc": "1.0", "id": 1, "method": "x"}, {"id": 2, "result": "no"}, {"jsonrpc": "2.0"}):
            answer = await servers.handle("calc", junk)
            assert answer["error"]["code"] == -32600, junk
        nobody = await servers.handle("abacus", {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert nobody["error"]["code"] == -32601
        unknown = await servers.handle("calc", {"jsonrpc": "2.0", "id": 4, "method": "tools/teleport"})
        assert "error" in unknown and unknown["id"] == 4
        tg.cancel_scope.cancel()


async def test_a_traced_call_to_an_in_process_server_is_a_child_of_the_engines_span_for_it(make_options, spans):
    """A subprocess server asks the engine for its call's context (`FROBOZZ_TRACE_PARENTS`); one in the engine's
    process is handed it in the call's `_meta`, where the MCP SDK makes its server span from."""
    script = replies(Reply((ToolUse("mcp__calc__add", {"numbers": [1, 2]}),)), "done")
    async with ScriptedModel(script) as model:
        options = make_options(model, allowed_tools=["mcp__calc__add"], in_process_servers={"calc": create_server()})
        async with Engine(options) as engine:
            await engine.start()
            await engine.send("add")
            await until(engine.events(), Result)
    finished = spans.get_finished_spans()
    [tool] = [s for s in finished if s.name == f"{S.EXECUTE_TOOL} mcp__calc__add"]
    [served] = [s for s in finished if s.name == "tools/call add"]
    assert served.context.trace_id == tool.context.trace_id and served.parent.span_id == tool.context.span_id


async def test_a_server_given_as_a_factory_is_made_again_for_a_restarted_claude_and_one_that_fails_is_left_out(
    make_options,
):
    """A server's lifespan closes what it holds (fetch's HTTP client, forge's) when claude's session with it ends:
    the same object served to the next claude would answer from a closed client. A factory that fails (a server's
    own settings) leaves its server out, as one that fails to start over stdio: the others serve."""
    made: list[list[bool]] = []

    def factory() -> MCPServer:
        held = [True]  # open, until the server's lifespan ends
        made.append(held)

        @asynccontextmanager
        async def lifespan(_server):
            try:
                yield {}
            finally:
                held[0] = False

        server = MCPServer("calc", lifespan=lifespan)

        @server.tool()
        def add(numbers: list[int]) -> int:
            """Add the numbers, with a client that must be open."""
            if not held[0]:
                raise ToolError("the client is closed")
            return sum(numbers)

        return server

    script = replies(*(Reply((ToolUse("mcp__calc__add", {"numbers": [n, 1]}),)) if n else "ok" for n in (1, 0, 2, 0)))
    async with ScriptedModel(script) as model:
        async with Engine(
            make_options(
                model,
                allowed_tools=["mcp__calc__add"],
                in_process_servers={"calc": factory, "broken": lambda: int("not a number")},
            )
        ) as engine:
            await engine.start()
            await engine.send("add")
            [init] = of(await until(engine.events(), Result), SystemInit)
            assert {s.name: s.status for s in init.mcp_servers} == {"calc": "connected", "broken": "failed"}
            assert {name: str(e) for name, e in engine.in_process_failed.items()} == {
                "broken": "invalid literal for int() with base 10: 'not a number'"
            }
            engine.kill()
            await until(engine.events(), Restarted)
            await engine.send("add again")
            await until(engine.events(), Result)
    told = [r.tool_results()[0] for r in model.requests if r.tool_results()]
    assert len(made) == 2 and [t.get("is_error") for t in told] == [None, None], told
    assert ["2" in str(told[0]["content"]), "3" in str(told[1]["content"])] == [True, True]
