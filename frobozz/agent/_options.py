"""What a session may be made with, checked once, when it is made: a value claude cannot take (a `max_turns`
of "x") made a session every message of which failed as claude would not start, and `allowed_tools` given as
one string let through every tool whose name is part of it ("NotebookEdit" allowed `Edit`)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from frobozz.engine import MODEL_NAME, model_name_problem

from .exceptions import InputError

OPTIONS = ("model", "allowed_tools", "max_turns", "max_budget_usd", "memory")
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\s\x00-\x1f\x7f]+$")]


class SessionOptions(BaseModel):
    """claude's options for a session (`memory` is checked by `memory_option`, against the memory service)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: Annotated[str, Field(pattern=f"^{MODEL_NAME.pattern}$")] | None = None
    allowed_tools: Annotated[list[Name], Field(max_length=200)] | None = None
    max_turns: Annotated[int, Field(ge=1, le=100_000)] | None = None
    max_budget_usd: Annotated[float, Field(gt=0)] | None = None
    memory: Any = None

    @field_validator("max_budget_usd", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)  # JSON's 2 is as good as 2.0
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("a finite number")
        return value


def session_options(options: dict[str, Any]) -> dict[str, Any]:
    """`options` if claude can take every one, else InputError naming the first that it cannot."""
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise InputError(f"unknown session options: {', '.join(sorted(unknown))}")
    try:
        SessionOptions(**options)
    except ValidationError as e:
        wrong = e.errors()[0]
        where = ".".join(str(part) for part in wrong["loc"])
        said = wrong["msg"]
        if wrong["type"] == "string_pattern_mismatch":  # (pydantic says the pattern itself)
            said = (
                model_name_problem(str(wrong["input"])) or said
                if where == "model"
                else "a tool's name (such as Read or mcp__server__tool): no spaces, no permission rules"
            )
        raise InputError(f"{where}: {said}") from None
    return options
