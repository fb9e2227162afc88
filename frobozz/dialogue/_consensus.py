"""Consensus: the entry's boolean, or (for dialogues written before it, and agents that forget it) one of the
fallback phrases of the settings in its content."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._entries import Entry

# Words that, among the few before a phrase in its sentence, turn it around ("no consensus reached yet").
NEGATIONS = frozenset(
    {
        "no",
        "not",
        "never",
        "nor",
        "without",
        "hardly",
        "cannot",
        "can't",
        "don't",
        "doesn't",
        "haven't",
        "hasn't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "won't",
        "nothing",
    }
)
LOOKBACK = 3  # words


def _negated(before: str) -> bool:
    """Whether the last few words of `before`, in the same sentence, negate what follows."""
    sentence = re.split(r"[.!?;:\n]", before)[-1]
    return any(word.strip(",'\"()") in NEGATIONS for word in sentence.split()[-LOOKBACK:])


def consensus_of(entry: Entry, phrases: Sequence[str]) -> str | None:
    """How `entry` signals consensus: "field", "phrase: …", or None when it does not."""
    if entry.consensus:
        return "field"
    text = " ".join(entry.content.lower().split())
    for phrase in phrases:
        wanted = " ".join(phrase.lower().split())
        if wanted and any(not _negated(text[: at.start()]) for at in re.finditer(re.escape(wanted), text)):
            return f"phrase: {phrase}"
    return None
