"""The score over turns as an SVG polyline: points in the chart's own pixels, drawn by a template."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from frobozz.runner import TurnRecord

WIDTH, HEIGHT, PAD = 640, 220, 36


@dataclass(frozen=True)
class ScoreChart:
    points: str  # "x,y x,y …" for <polyline points>
    top: int  # the score at the top of the chart
    last_turn: int
    max_line: float | None  # the y of the game's maximum score, when it has one within the chart
    width: int = WIDTH
    height: int = HEIGHT
    pad: int = PAD

    @property
    def empty(self) -> bool:
        return not self.points


def score_chart(turns: Sequence[TurnRecord], max_score: int | None) -> ScoreChart:
    """Turn 0 at the left, the last turn at the right; 0 at the bottom, the maximum score (or the best so
    far, when the game has none) at the top."""
    if not turns:
        return ScoreChart("", max_score or 0, 0, None)
    scores = [t.score or 0 for t in turns]
    top = max(max_score or 0, *scores, 1)
    last = max(turns[-1].turn, 1)

    def x(turn: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * turn / last

    def y(score: int) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * max(score, 0) / top

    points = " ".join(f"{x(t.turn):.1f},{y(s):.1f}" for t, s in zip(turns, scores, strict=True))
    return ScoreChart(f"{x(0):.1f},{y(0):.1f} " + points, top, last, y(max_score) if max_score else None)
