"""Consensus: the entry's boolean, or (for dialogues written before it, and agents that forget it) one of the
fallback phrases of the settings in its content."""

from __future__ import annotations

from collections.abc import Sequence

from ._entries import Entry


def consensus_of(entry: Entry, phrases: Sequence[str]) -> str | None:
    """How `entry` signals consensus: "field", "phrase: …", or None when it does not."""
    if entry.consensus:
        return "field"
    text = " ".join(entry.content.lower().split())
    for phrase in phrases:
        wanted = " ".join(phrase.lower().split())
        if wanted and wanted in text:
            return f"phrase: {phrase}"
    return None
