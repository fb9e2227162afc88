"""Text a model chose (a path it tried, a key it wrote) on its way to a terminal or a log: made inert, so that
it is shown as data and never acts on what shows it (no escape sequences, no line breaks), and cut short."""

from __future__ import annotations


def inert(text: object, limit: int = 120) -> str:
    """`text` with every control character (and any other unprintable one) as `?`, at most `limit` characters."""
    raw = str(text)
    shown = "".join(c if c.isprintable() else "?" for c in raw[:limit])
    return shown if len(raw) <= limit else shown[: limit - 1] + "…"
