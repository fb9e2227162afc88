"""Tracing's cost: the runner's own time per turn and the whole turn (the Zork I walkthrough, text mode, the
scripted model), the CPU each turn costs (this process's, all its threads: the runner, the engine, its proxy,
the SDK's exporting threads; its children's: claude, the game; and, with tracing on, the Postgres server's
that keeps the spans; from the first turn's end to the last's), and the engine's events per second (a
scripted conversation with a tool call per turn), with tracing on against off, in one run. On: the SDK
exporting over OTLP/HTTP to a receiver on this machine and keeping the spans in Postgres (an embedded one the
bench starts first), as `--trace` does. A tracer provider is set once per process, so each side runs in a
process of its own, alternately.

The overhead figure is the CPU tracing adds to a turn, as a share of the turn's time with tracing off: CPU is
counted per process by the kernel, so it holds on a machine other work shares, where wall-clock figures swing
by 10% from one run to the next (their spread is printed beside them).

Run: .venv/bin/python bench/tracing.py [--turns 60] [--rounds 3]
Target (issue 32): tracing on adds under 2% per turn.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio

TARGET = 0.02


def receiver() -> tuple[str, dict[str, int]]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that takes every export (and counts what it took)."""
    took = {"requests": 0, "bytes": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            took["bytes"] += len(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            took["requests"] += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", took


async def engine_events(turns: int) -> float:
    """Events per second through the engine: each turn a Read tool call, then an answer."""
    from frobozz.engine import Engine, EngineOptions, Result
    from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse

    home = tempfile.mkdtemp(prefix="frobozz-bench-")
    notes = os.path.join(home, "notes.md")
    with open(notes, "w") as f:
        f.write("The lamp is in the living room.\n")

    def answer(request) -> Reply:
        if request.tool_results():
            return Reply((Text("It says the lamp is in the living room. " * 3),))
        return Reply((ToolUse("Read", {"file_path": notes}),))

    events = 0
    async with ScriptedModel(answer) as model:
        options = EngineOptions(env={**model.env(), "HOME": home}, cwd=home, allowed_tools=["Read"])
        async with Engine(options) as engine:
            await engine.start()
            t0 = time.perf_counter()
            for n in range(turns):
                await engine.send(f"what do the notes say? ({n})")
                async for event in engine.events():
                    events += 1
                    if isinstance(event, Result):
                        break
            took = time.perf_counter() - t0
    return events / took


def _cpu() -> float:
    """Seconds of CPU so far of this process (all its threads) and its living children (claude, the game)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    pgdata = os.environ.get("BENCH_PGDATA")
    if pgdata:  # the Postgres the spans are kept in: its server and the connections it has reaped
        with open(os.path.join(pgdata, "postmaster.pid")) as f:
            times = psutil.Process(int(f.readline())).cpu_times()
        total += times.user + times.system + times.children_user + times.children_system
    return total


async def runner(turns: int) -> tuple[list[float], float, int, float]:
    """The runner's own time per turn, the wall time per turn and the CPU per turn, both from the first turn's
    end to the last's (start-up is not a turn's cost), and how many turns were played."""
    from frobozz.runner import RunConfig, RunnerSettings, play

    contexts, marks = [], []

    def on_turn(context, record) -> None:
        if not contexts:
            contexts.append(context)
        marks.append((time.perf_counter(), _cpu()))

    result = await play(RunConfig(game="zork1", player="walkthrough", max_turns=turns), RunnerSettings(),
                        on_turn=on_turn)
    (t0, c0), (t1, c1) = marks[0], marks[-1]
    n = len(marks) - 1
    return contexts[0].own_turns, (t1 - t0) / n, result.turns, (c1 - c0) / n


def _count_kept(url: str) -> int:
    import asyncpg

    async def count() -> int:
        connection = await asyncpg.connect(url)
        try:
            return int(await connection.fetchval("SELECT count(*) FROM trace_spans"))
        except asyncpg.UndefinedTableError:
            return 0
        finally:
            await connection.close()

    return anyio.run(count)


def span_work(rounds: int = 2000) -> float:
    """Microseconds of the spans' own work for one turn as the engine makes them (the turn, two model
    requests, a tool call opened, given its input and result, and closed with the turn), CPU only."""
    from frobozz.engine import AssistantMessage, Result, ToolResultBlock, ToolUseBlock, UserMessage
    from frobozz.engine._tracing import EngineTrace

    use = ToolUseBlock(id="toolu_1", name="Read", input={"file_path": "/tmp/notes.md"})
    asked = AssistantMessage(session_id="s", message_id="m", model="claude", content=(use,))
    answered = UserMessage(session_id="s", content=(ToolResultBlock(tool_use_id="toolu_1", content="x" * 200),))
    result = Result(subtype="success", is_error=False, result="ok", session_id="s", num_turns=2, duration_ms=10,
                    total_cost_usd=0.01, usage={})
    payload = {"model": "claude-x", "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]}
    trace = EngineTrace({"frobozz.session.kind": "bench"})
    trace.start()
    trace.set_session_id("s")
    t0 = time.perf_counter()
    for n in range(rounds):
        trace.begin_turn("look")
        for _ in range(2):
            span = trace.model_request(payload, {"x-stainless-retry-count": "0"})
            if n % 2 == 0:
                trace.tool_started("toolu_1", "Read")
            if span is not None:
                span.set_attributes({"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20})
                span.end()
        trace.on_assistant(asked)
        trace.on_user(answered)
        trace.end_turn(result)
    took = time.perf_counter() - t0
    trace.close()
    return 1e6 * took / rounds


def child(on: bool, turns: int) -> None:
    """One side, in this process: tracing configured (to the receiver in the environment) or not."""
    if on:
        from frobozz.tracing import configure

        tracing = configure("frobozz-bench", force=True)
        assert tracing is not None
    own, turn, played, cpu = anyio.run(runner, turns)
    rate = anyio.run(engine_events, max(10, turns // 3))
    work = span_work()
    if on:
        tracing.shutdown()
    print(json.dumps({"span_us": work, "own_ms": 1000 * statistics.median(own), "own_mean_ms": 1000 * statistics.mean(own),
                      "turn_ms": 1000 * turn, "events_per_s": rate, "turns": played, "cpu_ms": 1000 * cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60, help="walkthrough turns per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side, alternating")
    parser.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child == "on", args.turns)
        return
    url, took = receiver()
    import pgserver

    postgres = pgserver.get_server(tempfile.mkdtemp(prefix="frobozz-bench-pg-"), cleanup_mode="delete")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "FROBOZZ_TRACE", "CLAUDE_CODE_ENABLE_TELEMETRY", "FROBOZZ_DATABASE_URL"))}
    kept = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "FROBOZZ_DATABASE_URL": postgres.get_uri(),
            "BENCH_PGDATA": str(postgres.pgdata)}
    sides = {"off": {}, "on": {**kept, "FROBOZZ_TRACE_CLAUDE": "false"},
             "on+claude": kept}  # (with claude's own telemetry, the default)
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for n in range(args.rounds):
        for side in list(sides)[::1 if n % 2 == 0 else -1]:
            env = {**base, "FROBOZZ_DATA_DIR": tempfile.mkdtemp(prefix="frobozz-bench-"), **sides[side]}
            done = subprocess.run([sys.executable, __file__, "--child", "off" if side == "off" else "on",
                                   "--turns", str(args.turns)], env=env, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                sys.exit(f"the {side} run failed:\n{done.stderr[-3000:]}")
            results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))

    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in results[side])

    kept_rows = _count_kept(postgres.get_uri())
    postgres.cleanup()

    def spread(side: str, key: str) -> str:
        values = [r[key] for r in results[side]]
        return f"{min(values):.1f}-{max(values):.1f}"

    print(f"Zork I walkthrough, text mode, scripted model: {args.turns} turns x {args.rounds} runs a side; "
          f"the receiver took {took['requests']} exports, {took['bytes'] / 1024:.0f} KiB; Postgres kept {kept_rows} spans")
    print(f"{'':44}{'off':>10}{'on':>10}{'on/off':>8}{'on+claude':>11}{'/off':>7}   off runs' spread")
    for label, key in (("runner's own time per turn, p50 (ms)", "own_ms"),
                       ("runner's own time per turn, mean (ms)", "own_mean_ms"),
                       ("whole turn, runner + claude, wall (ms)", "turn_ms"),
                       ("CPU per turn, Frobozz + claude + game (ms)", "cpu_ms"),
                       ("engine events per second", "events_per_s")):
        off, on, both = median("off", key), median("on", key), median("on+claude", key)
        print(f"  {label:42}{off:10.2f}{on:10.2f}{on / off:8.3f}{both:11.2f}{both / off:7.3f}   {spread('off', key)}")
    work = median("on", "span_us") - median("off", "span_us")
    print(f"the spans' own work per turn (a loop of the engine's span calls, CPU): {work:.0f} us on "
          f"({median('off', 'span_us'):.1f} us off)")
    turn = median("off", "turn_ms")
    for side in ("on", "on+claude"):
        added = median(side, "cpu_ms") - median("off", "cpu_ms")
        wall = median(side, "turn_ms") / turn - 1
        print(f"tracing {side}: {added:+.2f} ms of CPU per turn = {100 * added / turn:+.2f}% of a {turn:.0f} ms turn "
              f"(target < {100 * TARGET:.0f}%: {'met' if added / turn < TARGET else 'NOT met'}); "
              f"wall clock {100 * wall:+.1f}% (noise: see the spread)")
    print("(medians of each side's runs; on: Frobozz's spans, sent and kept; on+claude: and claude's own telemetry, "
          "the default)")


if __name__ == "__main__":
    main()
