"""Suggest after each turn: a sidecar reads the last exchange and proposes facts worth remembering;
they wait in the session's buffer (Postgres) and the next turn carries one short nudge listing them,
until the model stores a memory through cortex (the archive observer sees it and empties the buffer).
It runs beside the conversation, fire-and-forget: it adds nothing to the time between turns.

A fact that looks like a stored memory changed (the closest memory scores at least SIMILAR) goes to the
sidecar with that memory: when it says the new one replaces it, the nudge proposes superseding it rather
than storing a second, contradicting memory; the model decides, as for any suggestion.

Each step on the database (the stored memory to compare with, the buffer) goes through the Suggester's guard
(`step`, see `_steps`): one left out ends the suggestions of that exchange, said once by the guard."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..memory import DatabaseError, Hit, LoopSessionStore, MemoryStoreError
from ._steps import BackgroundStep, LeftOut, unbounded

log = logging.getLogger("frobozz.loop")
Ask = Callable[[str], Awaitable[str]]
MAX_FACTS = 3
NONE = "NONE"
SUGGEST_PROMPT = (
    "Here is the last exchange of a conversation. List up to {n} facts in it worth remembering in "
    "later conversations (about the user, their people, plans, preferences, decisions), one per line, "
    "each a short complete sentence. If there are none, answer {none}.\n\n"
    "User: {user}\n\nAssistant: {assistant}"
)
SIMILAR = 0.3  # a stored memory this close to a new fact may be the same fact, changed (RECALL_MIN_SCORE)
REPLACES = "REPLACES"
CONTRADICTS_PROMPT = (
    "A stored memory and a new fact from the conversation:\n\nStored: {old}\nNew: {new}\n\n"
    "Is the new fact the same thing as the stored one, changed since (a new address, a changed plan, a "
    "different preference), so that the stored one is no longer true? Answer {replaces} or KEEP, nothing else."
)


class Suggester:
    """After each exchange, asks a sidecar which facts are worth keeping and buffers them in the loop session
    (the next turn's nudge offers them to the model to store). `step` guards each step on the database (a session's
    or the plugin daemon's bounded one; none by default)."""

    def __init__(self, sessions: LoopSessionStore, ask: Ask, *, step: BackgroundStep = unbounded) -> None:
        self.sessions, self.ask, self.step = sessions, ask, step

    async def __call__(self, session_id: str, user: str, assistant: str, *, namespace: str | None = None) -> list[str]:
        """Propose and buffer the facts of one exchange (each that changes a stored memory as a supersede
        of it, when `namespace` is given); a failure is logged, never raised; a step left out ends them (its
        guard said why)."""
        try:
            answer = await self.ask(
                SUGGEST_PROMPT.format(n=MAX_FACTS, none=NONE, user=user[:4_000], assistant=assistant[:4_000])
            )
            facts = [f.strip(" -*\t") for f in answer.splitlines()]
            facts = [f for f in facts if f and f.upper().rstrip(".") != NONE][:MAX_FACTS]
            if namespace is not None:
                facts = [await self._changed(fact, namespace) for fact in facts]
            if facts:
                await self.step("suggesting", self.sessions.suggest(session_id, facts))
            return facts
        except LeftOut:
            return []  # (its guard said why)
        except Exception as e:  # noqa: BLE001 - suggestions are a help, never a fault
            log.warning("suggest: the last exchange was not read (%s: %s)", type(e).__name__, e)
            return []

    async def _changed(self, fact: str, namespace: str) -> str:
        """The fact, or, when the sidecar says it replaces the closest stored memory, the supersede of it."""

        async def closest() -> list[Hit]:
            try:
                return await self.sessions.memories.search(fact, limit=1, namespace=namespace, min_score=SIMILAR)
            except DatabaseError:
                raise  # (the guard's to judge: the database may not answer)
            except MemoryStoreError as e:
                log.info("suggest: no stored memory to compare with (%s)", e)
                return []

        hits = await self.step("the stored memory to compare with", closest())
        if not hits or hits[0].memory.content.strip() == fact.strip():
            return fact
        old = hits[0].memory
        verdict = await self.ask(CONTRADICTS_PROMPT.format(old=old.content[:2_000], new=fact, replaces=REPLACES))
        if not verdict.strip().upper().startswith(REPLACES):
            return fact
        quoted = old.content if len(old.content) <= 200 else old.content[:200] + "…"
        return f'{fact} (this changes memory {old.id}, "{quoted}": supersede({old.id}, …) rather than store)'


async def nudge_blocks(sessions: LoopSessionStore, session_id: str) -> list[dict[str, Any]]:
    """One short nudge for the next turn, listing what waits to be stored (nothing when nothing does)."""
    waiting = await sessions.suggestions(session_id)
    if not waiting:
        return []
    lines = "\n".join(f"- {fact}" for fact in waiting)
    return [
        {
            "type": "text",
            "text": "<memory-nudge>\nWorth keeping, if right (store it with cortex, or supersede "
            f"the memory it changes):\n{lines}\n</memory-nudge>",
        }
    ]
