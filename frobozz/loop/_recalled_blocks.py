"""Recalled memories as content blocks before a user's text (the search itself is `frobozz.memory.Recall`)."""

from __future__ import annotations

from typing import Any

from ..memory import Hit, memory_line


def recalled_blocks(hits: list[Hit]) -> list[dict[str, Any]]:
    """Content blocks to put before the user's text: one per memory, with its id and date."""
    if not hits:
        return []
    lines = "\n".join(memory_line(h.memory) for h in hits)
    return [
        {
            "type": "text",
            "text": f"<recalled-memories>\nFrom long-term memory (may help, may not):\n{lines}\n</recalled-memories>",
        }
    ]
