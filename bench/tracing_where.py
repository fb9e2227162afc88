"""Where tracing's CPU goes in the runner (issue 32): the Zork I walkthrough of `bench/tracing.py`, played with
tracing set up five ways, alternated round by round, each in a process of its own:

  off    no SDK (the API's no-op)
  sdk    the SDK and its span processor for the session id, no exporter: the span calls alone
  otlp   + the OTLP exporter only (to a receiver on 127.0.0.1)
  local  + the Postgres keeping only
  both   `frobozz.tracing.configure`, as `--trace` runs it (claude's own telemetry off)

For each, the CPU per turn of each thread of the runner's process (the kernel's count per thread, from the first
turn's end to the last's, what waits to be exported sent at both ends; the scripted model's thread, which stands
in for the API, left out), and the time the garbage collector took (`gc.callbacks`). Then, in one more run, the CPU
each tracing call takes where the runner makes it (`time.thread_time` around each outermost call), beside the same
calls in a tight loop (`bench/tracing.py`'s `span_work`): the loop finds the code and its data warm in the CPU's
caches, a call at a turn's pace does not.

Run: .venv/bin/python bench/tracing_where.py [--turns 60] [--rounds 3]   (about 5 minutes on a quiet machine)
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _ending import end_with_the_bench, scratch_postgres
from tracing import _flush, _scripted_model_thread, receiver, run_child, span_work

SIDES = ("off", "sdk", "otlp", "local", "both")
LOOP_SPANS = 3.5  # spans a round of span_work makes: its turn, two model requests, a tool call every other round


def _threads() -> dict[int, tuple[str, float]]:
    """Each living thread of this process: its name and its CPU so far (seconds)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    names[threading.main_thread().native_id] = "main"
    scripted = _scripted_model_thread()
    found = {}
    for task in os.listdir("/proc/self/task"):
        tid = int(task)
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
        name = "scripted model" if tid == scripted else names.get(tid, "other")
        found[tid] = (name, cpu)
    return found


def _group(name: str) -> str:
    if name.startswith(("OtelBatch", "frobozz-spans")):
        return "exporting"
    return name if name in ("main", "scripted model") else "other"


def _set_up(side: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from frobozz.tracing import configure
    from frobozz.tracing._local import LocalSpans
    from frobozz.tracing._otlp import LeanOTLPExporter
    from frobozz.tracing._setup import SessionOnEverySpan, WarnOnce, traces_endpoint

    if side == "off":
        return
    if side == "both":
        assert configure("frobozz-bench", force=True) is not None
        return
    provider = TracerProvider()
    provider.add_span_processor(SessionOnEverySpan())
    if side == "otlp":
        endpoint = traces_endpoint(os.environ)
        provider.add_span_processor(BatchSpanProcessor(WarnOnce(LeanOTLPExporter(endpoint=endpoint), endpoint)))
    elif side == "local":
        provider.add_span_processor(BatchSpanProcessor(LocalSpans(os.environ["FROBOZZ_DATABASE_URL"], 1.0)))
    trace.set_tracer_provider(provider)


class Calls:
    """The thread CPU of each outermost tracing call (a call inside another is the outer one's)."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}
        self.inside = False
        self.spans = 0

    def wrap(self, owner: Any, name: str, label: str) -> None:
        fn: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.inside:
                return fn(*args, **kwargs)
            self.inside = True
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.inside = False
                self.took[label] = self.took.get(label, 0.0) + time.thread_time() - started

        setattr(owner, name, timed)

    def install(self) -> None:
        from opentelemetry.sdk import trace as sdk

        from frobozz.engine import _proxy, _tracing

        for name in (
            "prepare_turn",
            "begin_turn",
            "set_session_id",
            "model_request",
            "tool_started",
            "on_assistant",
            "on_user",
            "end_turn",
        ):
            self.wrap(_tracing.EngineTrace, name, f"engine: {name}")
        self.wrap(_proxy.Proxy, "_end_span", "engine: the model request's end (its price included)")
        # spans made outside the engine's calls (in a text-mode walkthrough, only the runner's game act)
        self.wrap(sdk.Tracer, "start_as_current_span", "other spans (here the game act's): start")
        self.wrap(sdk.Tracer, "start_span", "other spans (here the game act's): start")
        self.wrap(sdk._Span, "set_attributes", "other spans (here the game act's): attributes")
        self.wrap(sdk._Span, "end", "other spans (here the game act's): end")
        start = sdk._Span.start

        def counted(span: Any, *args: Any, **kwargs: Any) -> None:
            self.spans += 1
            start(span, *args, **kwargs)

        sdk._Span.start = counted  # type: ignore[method-assign]


async def _play(turns: int, calls: Calls | None) -> dict[str, Any]:
    from frobozz.runner import RunConfig, RunnerSettings, play

    marks: list[tuple[float, dict[int, tuple[str, float]], float, int]] = []
    collected = [0.0, 0.0]  # seconds in the collector, the start of the one under way

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collected[1] = time.thread_time()
        else:
            collected[0] += time.thread_time() - collected[1]

    def on_turn(context: Any, record: Any) -> None:
        if marks and record.turn < turns:
            return
        _flush()  # what waits goes now: at the start, before the count; at the end, inside it (on this thread)
        if not marks and calls is not None:
            calls.took.clear()
            calls.spans = 0
        marks.append((time.process_time(), _threads(), collected[0], record.turn))

    gc.callbacks.append(on_gc)
    await play(RunConfig(game="zork1", player="walkthrough", max_turns=turns), RunnerSettings(), on_turn=on_turn)
    (cpu0, threads0, gc0, turn0), (cpu1, threads1, gc1, turn1) = marks[0], marks[-1]
    n = turn1 - turn0
    per: dict[str, float] = {}
    for tid, (name, cpu) in threads1.items():
        group = _group(name)
        per[group] = per.get(group, 0.0) + 1000 * (cpu - threads0.get(tid, (name, 0.0))[1]) / n
    scripted = per.pop("scripted model", 0.0)
    return {
        "own_ms": 1000 * (cpu1 - cpu0) / n - scripted,
        "threads": per,
        "gc_ms": 1000 * (gc1 - gc0) / n,
        "calls_us": {k: 1e6 * v / n for k, v in (calls.took if calls else {}).items()},
        "spans": calls.spans / n if calls else 0.0,
    }


def child(side: str, turns: int, measure_calls: bool) -> None:
    _set_up(side)
    calls = Calls() if measure_calls else None
    if calls is not None:
        calls.install()
    figures = anyio.run(_play, turns, calls)
    if calls is not None:
        figures["loop_us"] = span_work()
    print(json.dumps(figures))


def _run(side: str, turns: int, env: dict[str, str], measure_calls: bool = False) -> dict[str, Any]:
    return run_child(__file__, side, [side, "--turns", str(turns), *(["--calls"] if measure_calls else [])], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=60, help="walkthrough turns per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the five set-ups, alternated")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--calls", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.turns, args.calls)
        return
    url, took = receiver()
    scratch = tempfile.mkdtemp(prefix="frobozz-bench-pg-")
    postgres = scratch_postgres(scratch)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FROBOZZ_TRACE", "CLAUDE_CODE_"))},
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,
        "FROBOZZ_DATABASE_URL": postgres.get_uri(),
        "FROBOZZ_TRACE_CLAUDE": "false",
    }
    began = time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    try:
        for n in range(args.rounds):
            for side in SIDES[:: 1 if n % 2 == 0 else -1]:
                results[side].append(_run(side, args.turns, env))
        calls = _run("both", args.turns, env, measure_calls=True)
    finally:
        postgres.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)

    print(
        f"Zork I walkthrough, text mode, scripted model: {args.turns} turns x {args.rounds} rounds of "
        f"{', '.join(SIDES)} (alternated) in {time.monotonic() - began:.0f} s, load average "
        f"{os.getloadavg()[0]:.1f} at the end; the receiver took {took['requests']} exports"
    )
    print("CPU per turn (ms), the median of the rounds; beside each side's own CPU, its rounds' differences to off")
    groups = ("main", "exporting", "other")
    print(f"  {'':7}{'own':>8}{'-off, each round':>26}{'gc':>8}" + "".join(f"{g:>11}" for g in groups))
    for side in SIDES:
        rows = results[side]
        own = statistics.median(r["own_ms"] for r in rows)
        pairs = ", ".join(f"{a['own_ms'] - b['own_ms']:+.2f}" for a, b in zip(rows, results["off"], strict=True))
        line = f"  {side:7}{own:8.2f}{pairs if side != 'off' else '':>26}"
        line += f"{statistics.median(r['gc_ms'] for r in rows):8.2f}"
        line += "".join(f"{statistics.median(r['threads'].get(g, 0.0) for r in rows):11.3f}" for g in groups)
        print(line)
    print(f"The tracing calls where the runner makes them (one more 'both' run, {args.turns} turns), us per turn:")
    for label, us in sorted(calls["calls_us"].items(), key=lambda item: -item[1]):
        print(f"  {label:58}{us:8.1f}")
    total = sum(calls["calls_us"].values())
    in_run, in_loop = total / calls["spans"], calls["loop_us"] / LOOP_SPANS
    print(
        f"  {'all of them':58}{total:8.1f}   ({calls['spans']:.1f} spans a turn)\n"
        f"a span, us: {in_run:.1f} in the run (its calls only), {in_loop:.1f} in a tight loop of the engine's span "
        f"calls (bench/tracing.py's, its export included): {in_run / in_loop:.1f}x"
    )


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    main()
