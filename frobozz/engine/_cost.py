"""What each turn cost. claude puts `total_cost_usd` on every Result: a running total for its session, which a
new session starts at zero. A resumed session's new process does not carry on from the total the last process
reported: it restores the last total saved in the session's transcript (a `cost-state` record), which claude
saves only when a process of it ends gracefully. A process killed (kill -9, a crash) saves none, so the next one
carries on from an older total, or from zero.
A consumer that adds up turns keeps one `TurnCost` across its engines and asks it what each turn cost; when an
engine resumes a session, `resumed_by(engine)` sets that session's total to what its claude really restored."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ._events import Result
from ._transcripts import transcript_path

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["TurnCost"]

COST_STATE = "cost-state"  # claude's transcript record of a session's running total, written at a graceful exit


def restored_total(transcript: Path, session_id: str) -> float:
    """The running total claude restores when it resumes `session_id` from `transcript`: the last `cost-state`
    record of that session (0.0 with none, or with no transcript)."""
    total = 0.0
    try:
        with transcript.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if f'"{COST_STATE}"' not in line:  # (most lines are messages: no JSON parse for them)
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill
                if not isinstance(record, dict) or record.get("type") != COST_STATE:
                    continue
                if record.get("sessionId") != session_id:  # (claude keeps each session's own)
                    continue
                value = record.get("totalCostUSD")
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    total = max(float(value), 0.0)  # the last one wins, as claude reads them
    except OSError:
        return 0.0
    return total


class TurnCost:
    """The last running total claude reported for each session, turned into each turn's own cost."""

    def __init__(self) -> None:
        self._totals: dict[str | None, float] = {}

    def resumed(self, session_id: str, total: float) -> None:
        """The running total a session's claude starts at (what it restored): its next turn costs what claude's
        total grows by from there. A consumer resuming with an engine asks `resumed_by` instead, which knows."""
        self._totals[session_id] = max(total, 0.0)

    def resumed_by(self, engine: Engine) -> float | None:
        """`engine` has just started claude on a session it resumes: that session's running total is set to what
        claude restored from its transcript, and returned (None: the engine resumed no session).

        Ask it once `engine.start()` has returned (with a session store, the transcript is on this machine only
        from then on), before any live Result of the engine is handed to `of`; and again on a `Restarted` event
        that resumed (a claude that crashed saved no total). Until that Result the total is still the restored one:
        claude saves it only as it exits."""
        session_id = engine.session_id
        if not session_id:
            return None
        total = restored_total(transcript_path(session_id, engine.cwd, engine.env), session_id)
        self.resumed(session_id, total)
        return total

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
