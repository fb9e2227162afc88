"""A list setting as a person writes it in an environment variable: items separated by `sep`, or a JSON list
(pydantic-settings reads list settings as JSON only: a plain value was a traceback)."""

from __future__ import annotations

import json


def env_list(value: object, sep: str) -> object:
    """`value` as a list when it is text (for a field's `mode="before"` validator); anything else as it is."""
    if not isinstance(value, str):
        return value
    value = value.strip()
    if value.startswith("["):
        return json.loads(value)
    return [part.strip() for part in value.split(sep) if part.strip()]
