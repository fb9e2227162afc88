"""Suggest after each turn: a sidecar reads the last exchange and proposes facts worth remembering;
they wait in the session's buffer (Postgres) and the next turn carries one short nudge listing them,
until the model stores a memory through cortex (the archive observer sees it and empties the buffer).
It runs beside the conversation, fire-and-forget: it adds nothing to the time between turns."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..memory import SessionStore

log = logging.getLogger("frobozz.loop")
Ask = Callable[[str], Awaitable[str]]
MAX_FACTS = 3
NONE = "NONE"
SUGGEST_PROMPT = (
    "Here is the last exchange of a conversation. List up to {n} facts in it worth remembering in "
    "later conversations (about the user, their people, plans, preferences, decisions), one per line, "
    "each a short complete sentence. If there are none, answer {none}.\n\n"
    "User: {user}\n\nAssistant: {assistant}")


class Suggester:
    def __init__(self, sessions: SessionStore, ask: Ask) -> None:
        self.sessions, self.ask = sessions, ask

    async def __call__(self, session_id: str, user: str, assistant: str) -> list[str]:
        """Propose and buffer the facts of one exchange; a failure is logged, never raised."""
        try:
            answer = await self.ask(SUGGEST_PROMPT.format(n=MAX_FACTS, none=NONE, user=user[:4_000],
                                                          assistant=assistant[:4_000]))
            facts = [f.strip(" -*\t") for f in answer.splitlines()]
            facts = [f for f in facts if f and f.upper().rstrip(".") != NONE][:MAX_FACTS]
            if facts:
                await self.sessions.suggest(session_id, facts)
            return facts
        except Exception as e:  # suggestions are a help, never a fault
            log.warning("suggest: the last exchange was not read (%s: %s)", type(e).__name__, e)
            return []


async def nudge_blocks(sessions: SessionStore, session_id: str) -> list[dict[str, Any]]:
    """One short nudge for the next turn, listing what waits to be stored (nothing when nothing does)."""
    waiting = await sessions.suggestions(session_id)
    if not waiting:
        return []
    lines = "\n".join(f"- {fact}" for fact in waiting)
    return [{"type": "text", "text": f"<memory-nudge>\nWorth keeping, if right (store it with cortex):\n{lines}\n"
                                     "</memory-nudge>"}]
