"""claude's events made by hand, for an observer told them directly."""

from typing import Any

from frobozz.engine import Result


def turn_end(result: str = "", **fields: Any) -> Result:
    """A turn's end (claude's `result` message), each field plainly filled in; `fields` override them."""
    plain: dict[str, Any] = {
        "subtype": "success",
        "is_error": False,
        "session_id": "s",
        "num_turns": 1,
        "duration_ms": 1,
        "total_cost_usd": 0.0,
        "usage": {},
    }
    return Result(result=result, **{**plain, **fields})
