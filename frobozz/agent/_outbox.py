"""Webhook deliveries through an outbox in Postgres: an event's deliveries are written as rows, and every instance
delivers what is due, claiming rows with SKIP LOCKED for a while (a claim that lapses — its instance died mid-try
— lets another instance make the delivery), retrying with a doubling backoff, and after the last try counting a
failure against the webhook (enough in a row pause it, saying why). A paused webhook's deliveries wait for it to
be resumed. Each try is signed anew (HMAC-SHA256 over `timestamp.body`) and goes to the address the guard
checked (`_addresses.pinned`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import time
from typing import Any

import anyio
import asyncpg
import httpx

from frobozz.memory import DATABASE_ERRORS, DatabaseError

from ._addresses import Resolver, pinned
from ._store import query
from .exceptions import InputError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent.webhooks")
BATCH = 20  # deliveries claimed at once by an instance


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The webhook's signature header value: HMAC-SHA256 over `timestamp.body` with its secret."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class Outbox:
    def __init__(self, pool: asyncpg.Pool, settings: AgentSettings, instance: str, *,
                 resolve: Resolver = anyio.getaddrinfo) -> None:
        self.pool = pool
        self.settings = settings
        self.instance = instance
        self.resolve = resolve  # how host names are resolved (once per try; the request goes where it said)
        self._http = httpx.AsyncClient(timeout=10, follow_redirects=False, trust_env=False)
        self._wake = anyio.Event()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _do(self, method: str, sql: str, *args: Any) -> Any:
        return await query(self.pool, method, sql, *args)

    async def queue(self, owner: str, delivery: str, payload: dict[str, Any]) -> int:
        """Rows for the user's webhooks that are not paused, written before anything is sent; how many."""
        body = json.dumps(payload)
        rows = await self._do("fetch", "INSERT INTO agent_webhook_outbox (webhook_id, delivery, body) SELECT id, $2, $3 "
                                       "FROM agent_webhooks WHERE owner = $1 AND paused_at IS NULL "
                                       "ON CONFLICT DO NOTHING RETURNING id", owner, delivery, body)
        if rows:
            self.wake()
        return len(rows)

    def wake(self) -> None:
        """Look for due deliveries now (a webhook resumed)."""
        self._wake.set()

    async def pending(self) -> list[dict[str, Any]]:
        """What waits to be delivered (oldest first): for reports and tests."""
        rows = await self._do("fetch", "SELECT webhook_id, delivery, attempts, claimed_by, last_problem "
                                       "FROM agent_webhook_outbox ORDER BY id")
        return [dict(r) for r in rows]

    async def deliver_forever(self) -> None:
        """Make the due deliveries, this instance's share of them, until cancelled; between batches wait for a
        new row here or for the poll interval (rows queued by other instances, claims that lapsed)."""
        while True:
            try:
                with anyio.CancelScope(shield=True), anyio.fail_after(30):  # a claim is not cut in half at shutdown
                    claimed = await self._claim()
            except (DatabaseError, TimeoutError) as e:
                log.warning("webhook deliveries not claimed: %s", e)
                claimed = []
            if claimed:
                async with anyio.create_task_group() as tg:
                    for row in claimed:
                        tg.start_soon(self._try, row)
                continue
            wait = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                wait = await self._next_due()
            with anyio.move_on_after(wait if wait is not None else self.settings.webhook_poll):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _next_due(self) -> float | None:
        """Seconds until a retry here is due, at most the poll interval."""
        try:
            soonest = await self._do("fetchval", "SELECT EXTRACT(EPOCH FROM min(o.due_at) - now())::float8 FROM "
                                                 "agent_webhook_outbox o JOIN agent_webhooks w ON w.id = o.webhook_id "
                                                 "WHERE o.claimed_until IS NULL AND w.paused_at IS NULL")
        except DatabaseError:
            soonest = None
        return max(0.01, min(self.settings.webhook_poll, soonest if soonest is not None else math.inf))

    async def _claim(self) -> list[asyncpg.Record]:
        return await self._do(
            "fetch",
            "UPDATE agent_webhook_outbox o SET claimed_by = $1, claimed_until = now() + make_interval(secs => $2), "
            "attempts = o.attempts + 1 FROM agent_webhooks w WHERE w.id = o.webhook_id AND o.id IN ("
            "  SELECT q.id FROM agent_webhook_outbox q JOIN agent_webhooks h ON h.id = q.webhook_id "
            "  WHERE q.due_at <= now() AND (q.claimed_until IS NULL OR q.claimed_until < now()) "
            "  AND h.paused_at IS NULL ORDER BY q.id LIMIT $3 FOR UPDATE OF q SKIP LOCKED) "
            "RETURNING o.id, o.delivery, o.body, o.attempts, w.id AS webhook_id, w.url, w.secret",
            self.instance, float(self.settings.webhook_claim), BATCH)

    async def _try(self, row: asyncpg.Record) -> None:
        """One try of one delivery; then the row is gone (delivered, or given up on) or due again later."""
        body = row["body"].encode()
        stamp = str(int(time.time()))
        final = row["attempts"] >= max(1, self.settings.webhook_retries)
        try:
            target = await pinned(row["url"], https_only=False, loopback=self.settings.loopback_receivers,
                                  resolve=self.resolve)
            url, host, extensions = target.request()
            answer = await self._http.post(url, content=body, extensions=extensions, headers={
                **host, "Content-Type": "application/json", "X-Frobozz-Timestamp": stamp,
                "X-Frobozz-Signature": signature(row["secret"], stamp, body), "X-Frobozz-Delivery": row["delivery"]})
            problem = "" if answer.is_success else f"HTTP {answer.status_code}"
        except InputError as e:
            problem, final = str(e), True  # the address is refused now: trying again changes nothing
        except httpx.HTTPError as e:
            problem = f"{type(e).__name__}: {e}"[:300]
        try:
            if not problem:
                await self._done(row, "UPDATE agent_webhooks SET failures = 0 WHERE id = $1")
            elif final:
                log.warning("webhook %s: a delivery failed after %d tries (%s)", row["webhook_id"], row["attempts"],
                            problem)
                await self._done(row, "UPDATE agent_webhooks SET failures = failures + 1, "
                                      "paused_at = CASE WHEN failures + 1 >= $2 THEN now() END, "
                                      "paused_reason = CASE WHEN failures + 1 >= $2 THEN $3 END WHERE id = $1",
                                 self.settings.webhook_pause_after,
                                 f"{self.settings.webhook_pause_after} deliveries in a row failed; the last: {problem}")
            else:
                await self._do("execute", "UPDATE agent_webhook_outbox SET claimed_by = NULL, claimed_until = NULL, "
                                          "last_problem = $3, due_at = now() + make_interval(secs => $2) "
                                          "WHERE id = $1 AND claimed_by = $4", row["id"],
                               self.settings.webhook_backoff * 2 ** (row["attempts"] - 1), problem, self.instance)
        except DatabaseError as e:  # the claim lapses and the delivery is made again: at least once, never lost
            log.warning("webhook %s: the delivery's outcome is not recorded: %s", row["webhook_id"], e)

    async def _done(self, row: asyncpg.Record, update: str, *args: Any) -> None:
        """The row is gone and the webhook's record updated, at once (only while this instance's claim holds)."""
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                gone = await connection.fetchval("DELETE FROM agent_webhook_outbox WHERE id = $1 AND claimed_by = $2 "
                                                 "RETURNING 1", row["id"], self.instance)
                if gone:
                    await connection.execute(update, row["webhook_id"], *args)
        except DATABASE_ERRORS as e:
            raise DatabaseError(f"the agent service's database failed: {e}") from e
