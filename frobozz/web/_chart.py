"""The score over turns as an SVG line chart: points, ticks and axis titles in the chart's own pixels, drawn
by a template. Its size is about the size of its box on the run page (about 420 pixels wide beside the map),
so its text is drawn near the size it is read at; on a phone it scales down a little."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from frobozz.runner import TurnRecord

WIDTH, HEIGHT = 420, 240
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 14, 42  # room for the score's ticks and title, and the turns' below
MAX_TICKS = 5


@dataclass(frozen=True)
class Tick:
    at: float  # x (turns) or y (score) in pixels
    label: str


@dataclass(frozen=True)
class ScoreChart:
    points: str  # "x,y x,y …" for <polyline points>
    top: int  # the score at the top of the chart
    last_turn: int
    max_line: float | None  # the y of the game's maximum score, when it has one within the chart
    x_ticks: tuple[Tick, ...] = ()
    y_ticks: tuple[Tick, ...] = ()
    max_score: int | None = None
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT  # the plot's right edge
    top_y: int = TOP
    bottom: int = HEIGHT - BOTTOM  # the plot's bottom edge (score 0)

    @property
    def empty(self) -> bool:
        return not self.points


def nice_step(span: int, most: int = MAX_TICKS) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50… that marks `span` with at most `most` steps."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if span / (step * factor) <= most:
                return step * factor
        step *= 10


def score_chart(turns: Sequence[TurnRecord], max_score: int | None) -> ScoreChart:
    """Turn 0 at the left, the last turn at the right; 0 at the bottom, the maximum score (or the best so
    far, when the game has none) at the top; round ticks on both axes."""
    if not turns:
        return ScoreChart("", max_score or 0, 0, None)
    scores = [t.score or 0 for t in turns]
    top = max(max_score or 0, *scores, 1)
    last = max(turns[-1].turn, 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(turn: int) -> float:
        return LEFT + plot_w * turn / last

    def y(score: int) -> float:
        return HEIGHT - BOTTOM - plot_h * max(score, 0) / top

    points = " ".join(f"{x(t.turn):.1f},{y(s):.1f}" for t, s in zip(turns, scores, strict=True))
    x_step, y_step = nice_step(last), nice_step(top)
    x_ticks = tuple(Tick(round(x(t), 1), str(t)) for t in range(0, last + 1, x_step))
    y_ticks = tuple(Tick(round(y(s), 1), str(s)) for s in range(0, top + 1, y_step))
    return ScoreChart(
        f"{x(0):.1f},{y(0):.1f} " + points,
        top,
        last,
        y(max_score) if max_score else None,
        x_ticks,
        y_ticks,
        max_score or None,
    )
