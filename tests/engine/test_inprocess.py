"""In-process MCP servers through the real claude CLI: listed in init, called by the model, their results,
schemas and errors the same as the same server's over stdio; a bad message to one is a JSON-RPC error."""

import sys
from pathlib import Path

import anyio
import pytest

from frobozz.engine import Engine, Result, SystemInit
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
