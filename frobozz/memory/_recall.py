"""Recall before each user turn (the memory loop's, and a game's after each move): search memory with
the user's message and, at the same time, with the queries a sidecar draws from it; keep what scores at
least the threshold and was not shown before in this session (the seen-set lives in Postgres, so a
resumed session does not repeat itself). Recall has a deadline: what is found by then goes with the turn,
the rest is dropped, and the turn is never late."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ._loop_sessions import LoopSessionStore
from ._records import Hit, Memory
from ._search import RECALL_MIN_SCORE
from ._store import MemoryStore
from .exceptions import DatabaseError, MemoryStoreError

if TYPE_CHECKING:
    from ._service import MemoryService

log = logging.getLogger("frobozz.memory")
T = TypeVar("T")
Ask = Callable[[str], Awaitable[str]]
MAX_QUERIES = 3
SEEN_SHARE = 0.2  # seconds of the deadline kept for the seen-set
QUERIES_PROMPT = (
    "Write up to {n} short search queries, one per line and nothing else, that would find notes from "
    "earlier conversations useful for answering this message:\n\n{message}"
)


class Recall:
    """The memories for one user turn, found within a deadline and never shown twice in a session (see the
    module)."""

    def __init__(
        self,
        store: MemoryStore,
        sessions: LoopSessionStore,
        *,
        ask: Ask | None = None,
        min_score: float = RECALL_MIN_SCORE,
        limit: int = 5,
        deadline: float = 1.5,
        context: bool = True,
    ) -> None:
        self.store, self.sessions, self.ask = store, sessions, ask
        self.min_score, self.limit, self.deadline = min_score, limit, deadline
        self.context = context  # False: notes stand alone (a game's), so their neighbours' words do not count

    async def __call__(self, session_id: str, namespace: str, message: str, *, extra: Sequence[str] = ()) -> list[Hit]:
        """The memories to show before `message`, best first; they are marked seen. `extra` queries are
        searched with the message, in the same batch (a game searches its room's name and each sentence)."""
        found: dict[int, Hit] = {}

        async def search(*queries: str) -> None:
            for hits in await self.store.search_many(
                [q[:10_000] for q in queries],
                limit=self.limit,
                namespace=namespace,
                min_score=self.min_score,
                context=self.context,
            ):
                for hit in hits:
                    if hit.memory.id not in found or found[hit.memory.id].score < hit.score:
                        found[hit.memory.id] = hit

        async def with_sidecar() -> None:
            if self.ask is None:
                return
            answer = await self.ask(QUERIES_PROMPT.format(n=MAX_QUERIES, message=message[:4_000]))
            queries = [q.strip(" -*\t") for q in answer.splitlines() if q.strip(" -*\t")][:MAX_QUERIES]
            if queries:
                await search(*queries)  # one batch: one model run embeds them all

        async def guarded(work: Callable[..., Awaitable[None]], *args: Any) -> None:
            try:
                await work(*args)
            except Exception as e:  # noqa: BLE001 - recall never stops the turn
                log.warning("recall: %s failed (%s: %s)", getattr(work, "__name__", work), type(e).__name__, e)

        if not message.strip():
            return []
        if not await self.store.recent(1, namespace):  # nothing to find: no sidecar asked, no model run
            return []
        end = anyio.current_time() + self.deadline  # searching may take all but the seen-set's share
        with anyio.CancelScope(deadline=end - min(SEEN_SHARE, self.deadline / 2)) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(guarded, search, message, *[q for q in extra if q.strip()])
                tg.start_soon(guarded, with_sidecar)
        if scope.cancelled_caught:
            log.info("recall: the deadline (%.1f s) passed; the turn goes with what was found", self.deadline)
        best = sorted(found.values(), key=lambda h: (-h.score, -h.memory.id))
        with anyio.CancelScope(deadline=end):
            fresh = set(await self.sessions.unseen(session_id, [h.memory.id for h in best]))
            shown = [h for h in best if h.memory.id in fresh][: self.limit]
            await self.sessions.mark_seen(session_id, [h.memory.id for h in shown])
            return shown
        return []


def memory_line(memory: Memory) -> str:
    """How a memory is shown to the model, in recall and in the orientation alike: its id and date."""
    return f"- [memory {memory.id}, {memory.created_at:%Y-%m-%d}] {memory.content}"


async def quietly(
    part: str, work: Awaitable[T], default: T, *, within: float, service: MemoryService | None = None
) -> T:
    """`work`'s result, or `default` when it fails or outlasts `within` seconds (with a log line): memory is
    help, never a gate. With the `service` it works on, a database that hangs is waited out once, not per call:
    while memory is off (`MemoryService.going_without`) `work` is not started, unless `answering_now()` finds
    it back; when `work` runs out of time or meets a DatabaseError the service probes, and may turn it off (its
    one line says why, instead of this part's)."""
    if service is not None and not service.answering and not await service.answering_now():
        if inspect.iscoroutine(work):
            work.close()  # (never started: nothing to wait for, and no "never awaited" warning)
        return default
    why = f"slower than {within:.1f} s"
    with anyio.move_on_after(within):
        try:
            return await work
        except DatabaseError as e:
            if service is None:
                log.warning("memory: %s was left out (%s)", part, e)
                return default
            why = str(e).split(";", 1)[0]
        except MemoryStoreError as e:
            log.warning("memory: %s was left out (%s)", part, e)
            return default
    if service is None or not await service.going_without(f"{part}: {why}"):
        log.warning("memory: %s was left out (%s)", part, why)
    return default
