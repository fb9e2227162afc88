"""A run's traces as a waterfall (turns, and under each its model requests, tools and memory), from the spans
kept locally in Postgres: where the time went, with no tracing backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frobozz import _spans as S

MAX_TRACES = 200  # the latest turns a page draws


@dataclass(frozen=True)
class Bar:
    name: str
    depth: int
    left: float  # percent of its trace's span of time
    width: float
    ms: float
    error: bool
    detail: str


@dataclass(frozen=True)
class Trace:
    title: str
    ms: float
    bars: tuple[Bar, ...]


def _detail(span: dict[str, Any]) -> str:
    a = span["attributes"]
    if S.GEN_AI_INPUT_TOKENS in a:
        return f"{a.get(S.GEN_AI_INPUT_TOKENS, 0)} in, {a.get(S.GEN_AI_OUTPUT_TOKENS, 0)} out"
    if S.TOOL_OUTCOME in a:
        return str(a[S.TOOL_OUTCOME])
    if S.MEMORY_FOUND in a:
        return f"{a[S.MEMORY_FOUND]} found"
    return ""


def _bars(children: dict[str | None, list[dict[str, Any]]], start: float, total: float) -> tuple[Bar, ...]:
    """One trace's bars: each span under its parent (the roots are under None), siblings in the order they started."""
    bars: list[Bar] = []

    def walk(span: dict[str, Any], depth: int) -> None:
        offset = span["started_at"].timestamp() - start
        bars.append(
            Bar(
                span["name"],
                depth,
                round(100 * offset / total, 2),
                max(round(100 * span["duration_ms"] / 1000 / total, 2), 0.3),
                round(span["duration_ms"], 1),
                span["status"] == "error",
                _detail(span),
            )
        )
        for child in sorted(children.get(span["span_id"], ()), key=lambda c: c["started_at"]):
            walk(child, depth + 1)

    for root in sorted(children.get(None, ()), key=lambda r: r["started_at"]):
        walk(root, 0)
    return tuple(bars)


def waterfall(spans: list[dict[str, Any]], limit: int = MAX_TRACES) -> list[Trace]:
    """One waterfall per trace that has a turn in it, in order; each span a bar under its parent."""
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["trace_id"], []).append(span)
    out = []
    for members in by_trace.values():
        ids = {s["span_id"] for s in members}
        roots = [s for s in members if s["parent_id"] not in ids]
        turn = next((s for s in roots if s["name"] == S.TURN), None)
        if turn is None:
            continue
        start = min(s["started_at"] for s in members).timestamp()
        end = max(s["started_at"].timestamp() + s["duration_ms"] / 1000 for s in members)
        total = max(end - start, 1e-6)
        children: dict[str | None, list[dict[str, Any]]] = {}
        for s in members:
            children.setdefault(s["parent_id"] if s["parent_id"] in ids else None, []).append(s)
        number = turn["attributes"].get(S.TURN_NUMBER, "")
        out.append(Trace(f"turn {number}", round(1000 * total, 1), _bars(children, start, total)))
    return out[-limit:]
