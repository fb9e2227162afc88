"""What each turn cost. claude puts `total_cost_usd` on every Result: a running total for its session, which a
resumed session's new process carries on from (claude restores it), and which a new session starts at zero.
A consumer that adds up turns keeps one `TurnCost` across its engines and asks it what each turn cost."""

from __future__ import annotations

from ._events import Result

__all__ = ["TurnCost"]


class TurnCost:
    """The last running total claude reported for each session, turned into each turn's own cost."""

    def __init__(self) -> None:
        self._totals: dict[str | None, float] = {}

    def resumed(self, session_id: str, total: float) -> None:
        """The running total a session had when it was last seen (by an earlier process of the consumer's):
        its next turn costs what claude's total grows by from there."""
        self._totals[session_id] = max(total, 0.0)

    def of(self, result: Result) -> float | None:
        """What the turn this Result ends cost (None when claude reported no cost). A replayed Result is history:
        it costs nothing now and leaves the running total alone. A total smaller than the last one means claude
        counted anew (a session it could not restore), so all of it is this turn's."""
        total = result.total_cost_usd
        if total is None:
            return None
        if result.is_replay:
            return 0.0
        before = self._totals.get(result.session_id, 0.0)
        self._totals[result.session_id] = total
        return round(total - before if total >= before else total, 9)
