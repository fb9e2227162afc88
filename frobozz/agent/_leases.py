"""Many instances on one Postgres, the only coordination: which instance runs a session's claude (a lease
with a fencing token, renewed while the instance lives), the inbox that carries messages to it in the
order they were accepted, the answers to its questions (the first written wins), and one notification
channel that tells every instance what changed (`kind:session`: events, inbox, answer, interrupt, close).

A write from an instance whose lease another has taken is refused: the event log is written only under
the lease row's lock, with the token the writer was given."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

import anyio
import asyncpg

from frobozz.memory import DATABASE_ERRORS, DatabaseError

from ._events import Done, Logged, Status, from_data
from ._store import query, transaction
from .exceptions import LeaseLostError

log = logging.getLogger("frobozz.agent.leases")
CHANNEL = "frobozz_agent"
Note = Callable[[str, str], Awaitable[None]]  # (kind, session id)


def answered(events: Sequence[Logged]) -> list[str]:
    """The messages whose turn these events end (a done, or the idle that ends a turn that failed)."""
    return [
        e.event.message_id
        for e in events
        if isinstance(e.event, (Done, Status))
        and e.event.message_id
        and (isinstance(e.event, Done) or e.event.state == "idle")
    ]


_POST = """
WITH m AS (INSERT INTO agent_inbox (session_id, message_id, content, files) VALUES ($1, $2, $3, $5) RETURNING id)
SELECT pg_notify($4, 'inbox:' || $1) FROM m"""


class Leases:
    def __init__(self, pool: asyncpg.Pool, instance: str, ttl: float) -> None:
        self.pool = pool
        self.instance = instance
        self.ttl = ttl

    async def _do(self, method: str, sql: str, *args: Any) -> Any:
        return await query(self.pool, method, sql, *args)

    # -- leases ---------------------------------------------------------------------------------------
    async def acquire(self, session_id: str) -> int | None:
        """A new fencing token for the session when no live lease holds it (None: another instance has it)."""
        return await self._do(
            "fetchval",
            """
            INSERT INTO agent_leases (session_id, instance, token, expires)
            SELECT $1, $2, nextval('agent_lease_tokens'), now() + make_interval(secs => $3)
            WHERE EXISTS (SELECT 1 FROM agent_sessions WHERE id = $1)
            ON CONFLICT (session_id) DO UPDATE SET instance = EXCLUDED.instance, token = EXCLUDED.token,
                                                   expires = EXCLUDED.expires
            WHERE agent_leases.expires < now()
            RETURNING token""",
            session_id,
            self.instance,
            self.ttl,
        )

    async def renew(self, tokens: Collection[int]) -> dict[str, int]:
        """The leases of these tokens that this instance still holds, renewed: session -> token. Only these: a
        lease of a session this instance stopped running (its claim failed, or it let the lease lapse) is left
        to lapse, so that another instance takes it up, even when this one could not give it up."""
        rows = await self._do(
            "fetch",
            "UPDATE agent_leases SET expires = now() + make_interval(secs => $2) "
            "WHERE instance = $1 AND token = ANY($3::bigint[]) RETURNING session_id, token",
            self.instance,
            self.ttl,
            list(tokens),
        )
        return {r["session_id"]: r["token"] for r in rows}

    async def holder(self, session_id: str) -> int | None:
        """The token that holds the session's lease now (None: no one's)."""
        return await self._do(
            "fetchval",
            "SELECT token FROM agent_leases WHERE session_id = $1 AND instance = $2",
            session_id,
            self.instance,
        )

    async def release(self, session_id: str, token: int, *, force: bool = False) -> bool:
        """Give the lease up (unless messages wait for it, or `force`); others are told at once. A database that
        fails is a `DatabaseError`, as for every other call here: its callers run in the service's task group,
        which a raw driver error would end (every session with it)."""
        async with transaction(self.pool) as c:
            gone = await c.fetchval(
                "DELETE FROM agent_leases WHERE session_id = $1 AND token = $2 AND ($3 OR NOT EXISTS (SELECT 1 "
                "FROM agent_inbox WHERE session_id = $1 AND NOT done)) RETURNING 1",
                session_id,
                token,
                force,
            )
            if gone:
                await c.execute("SELECT pg_notify($1, $2)", CHANNEL, f"inbox:{session_id}")
        return bool(gone)

    async def unclaimed(self) -> list[str]:
        """Sessions with messages waiting and no live lease (their instance gone, or never claimed)."""
        rows = await self._do(
            "fetch",
            """
            SELECT DISTINCT i.session_id FROM agent_inbox i
            LEFT JOIN agent_leases l ON l.session_id = i.session_id AND l.expires > now()
            WHERE NOT i.done AND l.session_id IS NULL""",
        )
        return [r[0] for r in rows]

    # -- the event log, fenced -------------------------------------------------------------------------
    async def log(self, session_id: str, token: int | None, events: list[Logged]) -> None:
        """Write events under the lease (`token` None: a new session's first, before anyone holds it); the
        turns they end are marked answered in the same statement; every instance is told. One statement, so
        one round trip: the relay hands events on only once they are written."""
        seqs = [e.seq for e in events]
        kinds = [e.event.kind for e in events]
        datas = [json.dumps(e.event.data(), default=str) for e in events]
        try:
            held = await self.pool.fetchval(
                """
                WITH lease AS (SELECT token FROM agent_leases WHERE session_id = $1 FOR SHARE),
                     ok AS (SELECT $2::bigint IS NULL OR $2::bigint = (SELECT token FROM lease) AS yes),
                     written AS (INSERT INTO agent_events (session_id, seq, kind, data)
                                 SELECT $1, e.seq, e.kind, e.data::jsonb FROM unnest($3::int[], $4::text[], $5::text[])
                                     AS e(seq, kind, data)
                                 WHERE (SELECT yes FROM ok) RETURNING 1),
                     answered AS (UPDATE agent_inbox SET done = true WHERE session_id = $1 AND message_id = ANY($6)
                                  AND (SELECT yes FROM ok) RETURNING 1)
                SELECT CASE WHEN (SELECT yes FROM ok) THEN
                    pg_notify($7, 'events:' || $1) IS NULL OR (SELECT count(*) FROM written) >= 0 END""",
                session_id,
                token,
                seqs,
                kinds,
                datas,
                answered(events),
                CHANNEL,
            )
        except asyncpg.UniqueViolationError as e:
            raise LeaseLostError(f"session {session_id}: another instance wrote these event numbers") from e
        except DATABASE_ERRORS as e:
            raise DatabaseError(f"the agent service's database failed: {e}") from e
        if held is None:
            raise LeaseLostError(
                f"session {session_id}: the lease was taken over (token {token}); these events are not written"
            )

    async def last_event(self, session_id: str) -> int:
        """The number of the session's last event written (0: none)."""
        return int(
            await self._do(
                "fetchval", "SELECT coalesce(max(seq), 0) FROM agent_events WHERE session_id = $1", session_id
            )
        )

    async def events_after(self, session_id: str, after: int) -> list[Logged]:
        rows = await self._do(
            "fetch",
            "SELECT seq, kind, data::text FROM agent_events WHERE session_id = $1 AND seq > $2 ORDER BY seq",
            session_id,
            after,
        )
        return [Logged(seq=r["seq"], event=from_data(r["kind"], json.loads(r["data"]))) for r in rows]

    # -- the inbox and the answers ----------------------------------------------------------------------
    async def post(
        self, session_id: str, message_id: str, content: str, files: list[str], *, alone: bool = False
    ) -> bool:
        """Put a message in the session's inbox; every instance is told. `alone`: only when none of the session's
        messages waits or is being answered (else nothing is kept: False). The session's posters of such a message
        take turns on its row, so two at once cannot both find the inbox empty (whichever instance serves them)."""
        args = (session_id, message_id, content, CHANNEL, files)
        if not alone:
            await self._do("execute", _POST, *args)
            return True
        async with transaction(self.pool) as c:
            # NO KEY: posters take turns, while the session's events, leases and answers (rows that refer
            # to it, and take KEY SHARE) are written on as before
            await c.execute("SELECT 1 FROM agent_sessions WHERE id = $1 FOR NO KEY UPDATE", session_id)
            if await c.fetchval(
                "SELECT EXISTS (SELECT 1 FROM agent_inbox WHERE session_id = $1 AND NOT done)", session_id
            ):
                return False
            await c.execute(_POST, *args)
        return True

    async def waiting(self, session_id: str, after: int) -> list[tuple[int, str, str, list[str]]]:
        """The session's messages not yet answered, after inbox position `after`, in the order accepted: (position,
        message id, text, its files)."""
        rows = await self._do(
            "fetch",
            "SELECT id, message_id, content, files FROM agent_inbox WHERE session_id = $1 "
            "AND NOT done AND id > $2 ORDER BY id",
            session_id,
            after,
        )
        return [(r["id"], r["message_id"], r["content"], list(r["files"])) for r in rows]

    async def answer(self, session_id: str, question_id: str, answers: dict[str, Any] | None) -> bool:
        """Record the answer (None: timed out); False when the question already has one, or was never asked.
        Asked is written: the other instances' followers see a question once it is, a moment before the
        instance that wrote it has its own log caught up, and an answer may come to that one meanwhile. A time-out
        comes from the instance that asked, whether or not the question could be written."""
        return bool(
            await self._do(
                "fetchval",
                """
            WITH a AS (INSERT INTO agent_answers (session_id, question_id, answers)
                       SELECT $1, $2, $3::jsonb WHERE $3::jsonb IS NULL OR EXISTS (
                           SELECT 1 FROM agent_events
                           WHERE session_id = $1 AND kind = 'question' AND data->>'question_id' = $2)
                       ON CONFLICT DO NOTHING RETURNING 1)
            SELECT pg_notify($4, 'answer:' || $1) IS NOT NULL FROM a""",
                session_id,
                question_id,
                json.dumps(answers) if answers is not None else None,
                CHANNEL,
            )
        )

    async def questions(self, session_id: str, question_id: str) -> list[Any] | None:
        """What the question asked (its `questions`, as AskUserQuestion gave them); None when it was never asked
        (not yet written: see `answer`)."""
        found = await self._do(
            "fetchval",
            "SELECT (data->'questions')::text FROM agent_events WHERE session_id = $1 AND kind = 'question' "
            "AND data->>'question_id' = $2 LIMIT 1",
            session_id,
            question_id,
        )
        return None if found is None else list(json.loads(found) or [])

    async def answer_of(self, session_id: str, question_id: str) -> tuple[bool, dict[str, Any] | None]:
        """(closed?, the answers): closed with None when it timed out."""
        row = await self._do(
            "fetchrow",
            "SELECT answers::text FROM agent_answers WHERE session_id = $1 AND question_id = $2",
            session_id,
            question_id,
        )
        return (row is not None, json.loads(row[0]) if row is not None and row[0] is not None else None)

    async def notify(self, kind: str, session_id: str) -> None:
        await self._do("execute", "SELECT pg_notify($1, $2)", CHANNEL, f"{kind}:{session_id}")

    # -- hearing of it ----------------------------------------------------------------------------------
    async def listen(self, on_note: Note, *, ready: Callable[[], Any] | None = None) -> None:
        """Hand every notification to `on_note`, in order, until cancelled; a lost connection is opened again
        (`ready` is called each time it listens, so the caller can catch up on what it may have missed)."""
        notes_in, notes_out = anyio.create_memory_object_stream[str](1_000_000)

        def heard(_c: object, _pid: int, _channel: str, payload: object) -> None:
            notes_in.send_nowait(str(payload))  # a NOTIFY's payload is text

        async def deliver() -> None:
            async for payload in notes_out:
                kind, _, session_id = payload.partition(":")
                try:
                    await on_note(kind, session_id)
                except Exception:  # one note that fails does not stop the others
                    log.exception("agent notification %s failed", payload[:80])

        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver)
            while True:
                try:
                    async with self.pool.acquire() as c:
                        lost = anyio.Event()
                        c.add_termination_listener(lambda _c, lost=lost: lost.set())  # this connection's own Event
                        await c.add_listener(CHANNEL, heard)
                        if ready is not None:
                            ready()
                        try:
                            while not lost.is_set() and not c.is_closed():
                                with anyio.move_on_after(5):
                                    await lost.wait()
                        finally:
                            if not lost.is_set() and not c.is_closed():  # (a lost one is no longer ours to ask)
                                await c.remove_listener(CHANNEL, heard)
                    log.warning("the connection listening for other instances was lost; listening again")
                except DATABASE_ERRORS as e:
                    log.warning("listening for other instances failed (%s); trying again", e)
                await anyio.sleep(1)
