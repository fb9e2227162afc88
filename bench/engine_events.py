"""Engine benchmark: parse/route throughput of a recorded claude stream, a scripted 50-turn
conversation through the engine versus the bare CLI with the same script, the game walkthrough in
tools mode with the game server in-process versus over stdio, and what a hook adds to a tool call,
in one run.

Run: FROBOZZ_GAMES_DIR=../shared/games .venv/bin/python bench/engine_events.py [--turns 50] [--rounds 3]
Targets (issue 3): routing overhead under 5% of the bare CLI's wall time; over 100k events/s
through the router. Issue 19: the in-process game server against stdio (ms per turn), and a hook's
round trip (ms per tool call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import anyio
import anyio.lowlevel
import orjson

from frobozz.engine import (
    Engine,
    EngineOptions,
    HookInput,
    HookMatcher,
    Result,
    Router,
    Session,
    find_claude,
    parse_event,
)
from frobozz.engine.testing import Reply, ScriptedModel, ToolUse


def script(request):  # the same answer shape for every turn, for both paths
    return f"Answer to {request.last_user_text()[:40]}: go north, then open the door."


def bare_cli(model: ScriptedModel, home: str, turns: int) -> tuple[float, list[bytes]]:
    """The CLI alone, driven as simply as possible: write a line, read until its result."""
    env = {**os.environ, **model.env(), "HOME": home, "CLAUDE_CODE_MAX_RETRIES": "0"}
    command = [find_claude(), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    recorded: list[bytes] = []
    t0 = time.perf_counter()
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=home
    ) as process:
        assert process.stdin and process.stdout
        for turn in range(turns):
            process.stdin.write(
                json.dumps({"type": "user", "message": {"role": "user", "content": f"turn {turn}"}}).encode() + b"\n"
            )
            process.stdin.flush()
            for line in process.stdout:
                recorded.append(line)
                if b'"type":"result"' in line:
                    break
        process.stdin.close()
        process.wait()
    return time.perf_counter() - t0, recorded


async def through_engine(model: ScriptedModel, home: str, turns: int, proxy: bool) -> float:
    options = EngineOptions(env={**model.env(), "HOME": home, "CLAUDE_CODE_MAX_RETRIES": "0"}, cwd=home, proxy=proxy)
    t0 = time.perf_counter()
    async with Session(options) as session:
        for turn in range(turns):
            await session.send(f"turn {turn}")
        results = 0
        async for event in session.events():
            if isinstance(event, Result):
                results += 1
                if results == turns:
                    break
    return time.perf_counter() - t0


async def route_throughput(lines: list[bytes], total: int, observers: int) -> tuple[float, float, float]:
    """(events/s parsed from JSON lines, events/s routed to `observers` observers, both together)."""
    stream = (lines * (total // len(lines) + 1))[:total]
    t0 = time.perf_counter()
    for line in stream:  # as the engine's reader does: parse, hand on, keep nothing
        parse_event(orjson.loads(line))
    parse_rate = total / (time.perf_counter() - t0)
    recorded = [parse_event(orjson.loads(line)) for line in lines]  # immutable: safe to send again
    route_rate = await _route((recorded * (total // len(recorded) + 1))[:total], observers)
    return parse_rate, route_rate, 1 / (1 / parse_rate + 1 / route_rate)


async def _route(events: list, observers: int) -> float:
    total = len(events)

    class Count:
        def __init__(self):
            self.n = 0

        def on_event(self, event):
            self.n += 1

    counters = [Count() for _ in range(observers)]
    router = Router(counters, report=lambda e: None, buffer=10_000)
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        router.start(tg)
        for i, event in enumerate(events, 1):
            router.dispatch(event)
            if i % 2000 == 0:
                while any(c.n < i for c in counters):  # as a live stream would: observers keep up
                    await anyio.lowlevel.checkpoint()
        router.close()
    elapsed = time.perf_counter() - t0
    assert all(c.n == total for c in counters), [c.n for c in counters]
    return total / elapsed


async def walkthrough_in_tools_mode(moves: int, in_process: bool) -> float:
    """Seconds per game move: the scripted walkthrough player acting through the game server's tools."""
    import sys

    from frobozz.games import GameLibrary, GamesSettings
    from frobozz.games._library import walkthrough_for
    from frobozz.runner._players import tool_handler
    from frobozz.servers.game import Settings, create_server

    commands = walkthrough_for(GameLibrary(GamesSettings()).find("zork1").md5)[:moves]
    home = tempfile.mkdtemp()
    servers = (
        {"in_process_servers": {"game": create_server(Settings(data_dir=home))}}
        if in_process
        else {
            "mcp_config": {
                "mcpServers": {
                    "game": {
                        "command": sys.executable,
                        "args": ["-m", "frobozz", "serve", "game"],
                        "env": {"FROBOZZ_DATA_DIR": home},
                    }
                }
            }
        }
    )
    async with ScriptedModel(tool_handler(commands, "zork1")) as model:
        options = EngineOptions(
            env={**model.env(), "HOME": home, "CLAUDE_CODE_MAX_RETRIES": "0"},
            cwd=home,
            allowed_tools=["mcp__game__new_game", "mcp__game__act"],
            **servers,
        )
        async with Engine(options) as engine:
            await engine.start()
            await engine.wait_for_mcp(["game"])
            t0 = time.perf_counter()
            await engine.send("Play Zork I through the game tools.")
            async for event in engine.events():
                if isinstance(event, Result):
                    break
            elapsed = time.perf_counter() - t0
    acted = sum(1 for r in model.requests for b in r.tool_results())
    assert acted >= moves, f"only {acted} of {moves} moves were answered"  # new_game and every act
    return elapsed / moves


async def tool_calls(calls: int, hooked: bool) -> float:
    """Seconds per Read tool call, with a PreToolUse hook that lets it through, or without one."""
    home = tempfile.mkdtemp()
    path = os.path.join(home, "notes.txt")
    with open(path, "w") as f:
        f.write("a note\n")

    def handler(request):
        done = sum(
            1
            for m in request.messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        return Reply((ToolUse("Read", {"file_path": path}),)) if done < calls else "done"

    async def let_through(event: HookInput) -> None:
        return None

    hooks = {"PreToolUse": [HookMatcher([let_through], "Read")]} if hooked else {}
    async with ScriptedModel(handler) as model:
        options = EngineOptions(
            env={**model.env(), "HOME": home, "CLAUDE_CODE_MAX_RETRIES": "0"},
            cwd=home,
            allowed_tools=["Read"],
            hooks=hooks,
        )
        async with Engine(options) as engine:
            await engine.start()
            t0 = time.perf_counter()
            await engine.send("read it again and again")
            async for event in engine.events():
                if isinstance(event, Result):
                    break
            return (time.perf_counter() - t0) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--moves", type=int, default=150, help="walkthrough moves in tools mode, each way")
    parser.add_argument("--calls", type=int, default=40, help="tool calls with and without a hook")
    args = parser.parse_args()
    with ScriptedModel(script) as model:
        bare, engine, engine_proxy = [], [], []
        recorded: list[bytes] = []
        for _ in range(args.rounds):  # interleaved, so drift on the machine hits all three alike
            seconds, recorded = bare_cli(model, tempfile.mkdtemp(), args.turns)
            bare.append(seconds)
            engine.append(anyio.run(through_engine, model, tempfile.mkdtemp(), args.turns, False))
            engine_proxy.append(anyio.run(through_engine, model, tempfile.mkdtemp(), args.turns, True))
    parse_rate, route_rate, both_rate = anyio.run(route_throughput, recorded, args.events, 3)
    b, e, p = (statistics.median(x) for x in (bare, engine, engine_proxy))
    print(f"recorded stream: {len(recorded)} lines from {args.turns} turns; {args.events} events replayed")
    print(f"  route to 3 observers           {route_rate:12,.0f} events/s   (target > 100,000)")
    print(f"  parse JSON lines into events   {parse_rate:12,.0f} events/s")
    print(f"  parse and route together       {both_rate:12,.0f} events/s")
    print(f"{args.turns}-turn scripted conversation, median of {args.rounds} (start-up included):")
    print(f"  bare claude CLI                {b:8.2f} s")
    print(f"  engine, no proxy               {e:8.2f} s   overhead {100 * (e / b - 1):+5.1f}%   (target < 5%)")
    print(f"  engine with its HTTP proxy     {p:8.2f} s   overhead {100 * (p / b - 1):+5.1f}%")
    stdio = anyio.run(walkthrough_in_tools_mode, args.moves, False)
    inproc = anyio.run(walkthrough_in_tools_mode, args.moves, True)
    print(f"Zork I walkthrough in tools mode, {args.moves} moves (one run each way):")
    print(f"  game server over stdio         {1000 * stdio:8.1f} ms per move")
    print(f"  game server in-process         {1000 * inproc:8.1f} ms per move   ratio {inproc / stdio:.2f}x of stdio")
    bare_calls = anyio.run(tool_calls, args.calls, False)
    hooked_calls = anyio.run(tool_calls, args.calls, True)
    print(f"{args.calls} Read tool calls, one turn:")
    print(f"  without a hook                 {1000 * bare_calls:8.1f} ms per call")
    print(
        f"  with a PreToolUse hook         {1000 * hooked_calls:8.1f} ms per call   "
        f"the hook's round trip adds {1000 * (hooked_calls - bare_calls):+.1f} ms"
    )


if __name__ == "__main__":
    main()
