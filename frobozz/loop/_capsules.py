"""Capsules: short summaries of recent conversation (the last session, earlier today), written by the
sidecar from the archive and cached in Postgres; a capsule is written again only when the archive
has moved past what it summarised. The orientation's `capsules` provider reads them.

Each step on the database goes through the refresh's guard (`step`, see `_steps`): one left out ends the refresh,
said once by the guard; what was written before it stands."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from ..memory import ArchiveEntry, Capsule, LoopSessionStore
from ._steps import BackgroundStep, LeftOut, unbounded

log = logging.getLogger("frobozz.loop")
Ask = Callable[[str], Awaitable[str]]
LAST_SESSION, EARLIER_TODAY = "the last session", "earlier today"
MAX_CHARS = 8_000  # of the most recent conversation given to the sidecar
SUMMARY_PROMPT = (
    "Summarise this conversation in at most three sentences, for the same assistant to read "
    "before it talks with the user again. Only the summary.\n\n{conversation}"
)


async def refresh_capsules(
    sessions: LoopSessionStore, namespace: str, current: str, ask: Ask, *, step: BackgroundStep = unbounded
) -> list[Capsule]:
    """Bring the namespace's capsules up to date (the current session is not part of them); failures
    are logged and leave the old capsule in place. `step` guards each step on the database (a session's or the
    plugin daemon's bounded one; none by default): one left out ends the refresh (its guard said why)."""
    written: list[Capsule] = []
    try:
        last = next((s for s in await step("the sessions", sessions.list(namespace)) if s.id != current), None)
        earlier: list[ArchiveEntry] = []
        midnight = datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        searching = sessions.search_archive(namespace=namespace, since=midnight, limit=500)
        for entry in await step("searching the archive", searching):
            if entry.session_id != current:
                earlier.append(entry)
        periods = {
            EARLIER_TODAY: earlier[::-1],
            LAST_SESSION: await step("a transcript", sessions.transcript(last.id)) if last is not None else [],
        }
        for period, entries in periods.items():
            said = [e for e in entries if e.kind in ("user", "assistant") and e.content.strip()]
            if not said:
                continue
            cached = await step("a capsule", sessions.capsule(namespace, period))
            if cached is not None and cached.until_id >= said[-1].id:
                written.append(cached)
                continue
            conversation = "\n".join(f"{'User' if e.kind == 'user' else 'Assistant'}: {e.content}" for e in said)
            try:
                summary = (await ask(SUMMARY_PROMPT.format(conversation=conversation[-MAX_CHARS:]))).strip()
            except Exception as e:  # noqa: BLE001 - the old capsule stays
                log.warning("capsules: %s was not summarised (%s: %s)", period, type(e).__name__, e)
                continue
            if summary:
                writing = sessions.put_capsule(namespace, period, said[-1].id, summary)
                written.append(await step("writing a capsule", writing))
    except LeftOut:
        pass  # (its guard said why)
    return written
