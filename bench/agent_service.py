"""Agent service benchmark: the time from `POST /sessions/ID/messages` to the first `text_delta` with 1, 10 and
100 clients listening to the session's events, against the same turn sent straight through the engine, in
one run; and whether every client got every event. The real claude CLI, a scripted model, real HTTP and
Postgres on this machine.

Run: .venv/bin/python bench/agent_service.py [--rounds 15] [--clients 1,10,100]
Target (issue 21): the service adds under 10 ms p50 with 10 clients, and every client gets every event.
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import replace
import tempfile
import time
from pathlib import Path

import anyio
import httpx

from frobozz._loopback import LoopbackServer
from frobozz.agent import Agent, AgentSettings, create_app
from frobozz.engine import Engine, EngineOptions, StreamEvent
from frobozz.engine.testing import ScriptedModel
from frobozz.memory import MemorySettings
from frobozz.servers._auth import BearerToken

TOKEN = "bench-token-0123456789abcdef"


def answer(request) -> str:
    return "North of the house, a path leads into the forest. " * 4


async def engine_baseline(options: EngineOptions, rounds: int) -> list[float]:
    """Seconds from send() to the first text delta, the engine alone (claude already started)."""
    took = []
    async with Engine(options) as engine:
        await engine.start()
        for n in range(rounds + 1):
            t0 = time.perf_counter()
            await engine.send(f"turn {n}")
            first = None
            async for event in engine.events():
                if first is None and isinstance(event, StreamEvent) and \
                        (event.event.get("delta") or {}).get("type") == "text_delta":
                    first = time.perf_counter() - t0
                if type(event).__name__ == "Result":
                    break
            if n:  # the first turn warms up
                took.append(first or 0.0)
    return took


async def follow(client: httpx.AsyncClient, path: str, after: int, turns: int, seen: list, firsts: list,
                 started: dict) -> None:
    """One listening client: every event (by id), and when it saw each turn's first text delta."""
    done = 0
    waiting_first = True
    async with client.stream("GET", path, headers={"Last-Event-ID": str(after)}) as response:
        event: dict = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                key, _, value = line.partition(":")
                event[key] = value.lstrip()
                continue
            seen.append(int(event["id"]))
            if event.get("event") == "text_delta" and waiting_first and started["t0"]:
                firsts.append(time.perf_counter() - started["t0"])
                waiting_first = False
            if event.get("event") == "done":
                done += 1
                waiting_first = True
                if done == turns:
                    return
            event = {}


async def service_rounds(url: str, session: str, last: int, clients: int, rounds: int,
                         agent_busy) -> tuple[list[float], bool]:
    """`rounds` turns with `clients` following the session's events from `last` (the log's end now)."""
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120,
                                 limits=limits) as http:
        seen: list[list[int]] = [[] for _ in range(clients)]
        firsts: list[list[float]] = [[] for _ in range(clients)]
        started = {"t0": 0.0}
        async with anyio.create_task_group() as tg:
            for i in range(clients):
                tg.start_soon(follow, http, f"/sessions/{session}/events", last, rounds, seen[i], firsts[i], started)
            await anyio.sleep(0.5)  # every client connected and caught up
            for n in range(rounds):
                started["t0"] = time.perf_counter()
                posted = await http.post(f"/sessions/{session}/messages", json={"text": f"turn {n}"})
                assert posted.status_code == 202
                while min(len(f) for f in firsts) <= n or not all(s and s[-1] == seen[0][-1] for s in seen) \
                        or agent_busy():
                    await anyio.sleep(0.001)  # each turn alone, as the engine's: every client has its done
    everyone = all(s == seen[0] for s in seen) and seen[0] == list(range(last + 1, last + 1 + len(seen[0])))
    return [t for f in firsts for t in f], everyone


async def main(args: argparse.Namespace) -> None:
    import pgserver

    with tempfile.TemporaryDirectory() as scratch:
        os.chmod(scratch, 0o755)  # run as root, the service runs claude as the workspace's owner: it must get in
        server = pgserver.get_server(Path(scratch) / "pg", cleanup_mode="delete")
        try:
            async with ScriptedModel(answer) as model:
                home = Path(scratch) / "home"
                home.mkdir()
                env = {**model.env(), "HOME": str(home), "CLAUDE_CODE_MAX_RETRIES": "0"}
                agent = Agent(AgentSettings(workspaces=Path(scratch) / "ws", max_live=4),
                              engine_options=EngineOptions(env=env),
                              memory=MemorySettings(database_url=server.get_uri()))
                with LoopbackServer(BearerToken(create_app(agent), TOKEN), lifespan="on") as site:
                    async with httpx.AsyncClient(base_url=site.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                                 timeout=120) as http:
                        session = (await http.post("/sessions", json={"workspace": "bench/one"})).json()["session_id"]
                    live = agent._live[session]
                    same = replace(live._options({}), session_store=None)  # as the service runs it: hooks and all
                    #   (but the transcript store, whose pool belongs to the service's event loop)
                    base = await engine_baseline(same, args.rounds)
                    p50_engine = statistics.median(base)
                    print(f"{args.rounds} turns per row, the real claude CLI, a scripted model, Postgres and HTTP on "
                          "this machine")
                    print(f"engine alone (the service's options): first text delta {1000 * p50_engine:.1f} ms p50 "
                          "after send()")
                    async with httpx.AsyncClient(base_url=site.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                                 timeout=120) as http:
                        await http.post(f"/sessions/{session}/messages", json={"text": "warm up"})

                    def log_end() -> int:
                        return live.relay.last_seq  # an int read across threads: the log's end

                    def busy() -> bool:
                        return live.busy

                    while busy():
                        await anyio.sleep(0.01)
                    await service_rounds(site.url, session, log_end(), 1, 1, busy)  # claude started, the path warm
                    print(f"{'clients':>8} {'first delta p50':>16} {'p90':>8} {'added p50':>10} {'every event':>12}")
                    for clients in (int(c) for c in args.clients.split(",")):
                        while busy():
                            await anyio.sleep(0.01)
                        firsts, everyone = await service_rounds(site.url, session, log_end(), clients, args.rounds,
                                                                busy)
                        p50, p90 = statistics.median(firsts), statistics.quantiles(firsts, n=10)[-1]
                        print(f"{clients:>8} {1000 * p50:>13.1f} ms {1000 * p90:>5.1f} ms "
                              f"{1000 * (p50 - p50_engine):>+7.1f} ms {'yes' if everyone else 'NO':>12}")
                print("target: under 10 ms added p50 with 10 clients, every client every event")
        finally:
            server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--clients", default="1,10,100")
    anyio.run(main, parser.parse_args())
