"""What a resumed claude process starts its session's running cost total at.

claude puts a running total on every Result (`total_cost_usd`), and a resumed session's new process carries on
from the total it restores from the transcript: the last `cost-state` record of that session, which claude
writes when a process of it ends gracefully. A process killed (kill -9, a crash) writes none, so the next one
carries on from an older total, or from zero: neither is what the dialogue's ledger says the role has spent (a
turn cut off may have spent some too). A turn's cost is what the total grows by from what claude started at."""

from __future__ import annotations

import json
import math
from pathlib import Path


def restored_cost(transcript: Path, session_id: str) -> float:
    """The running total claude will restore when it resumes `session_id` from `transcript` (0.0 with no record)."""
    total = 0.0
    try:
        with transcript.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"cost-state"' not in line:  # (most lines are messages: no JSON parse for them)
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill
                if not isinstance(record, dict) or record.get("type") != "cost-state":
                    continue
                if record.get("sessionId") != session_id:  # (claude keeps each session's own)
                    continue
                value = record.get("totalCostUSD")
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    total = max(float(value), 0.0)  # the last one wins, as claude reads them
    except OSError:
        return 0.0
    return total
