"""Webhook deliveries through an outbox in Postgres: an event's deliveries are written as rows, and every instance
delivers what is due. A webhook's deliveries are made in the order of their events, by one instance at a time: it
locks the webhook (SKIP LOCKED) while it claims a run of them for a while (a claim that lapses — its instance
died mid-try — lets another instance make them, from the first). A failed try is retried with a doubling backoff
(the later deliveries wait behind it); after the last try a failure is counted against the webhook and the
delivery given up on, but enough in a row pause the webhook, saying why, and that delivery is kept. A paused
webhook's deliveries, those of the events that happen while it is paused too, wait for it to be resumed: at most
`webhook_keep` a webhook (beyond it the oldest go, and its `dropped` counts them). Each try is signed anew
(HMAC-SHA256 over `timestamp.body`) with the same `X-Frobozz-Delivery` id, and goes to the address the guard
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

from frobozz._tls import tls_context
from frobozz.memory import DatabaseError

from ._addresses import Resolver, pinned
from ._store import query, transaction
from .exceptions import InputError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent.webhooks")
BATCH = 20  # webhooks whose deliveries an instance claims at once, and deliveries of each
# a webhook's waiting deliveries beyond the newest $2, not being made now: gone, and counted against it
_TRIM = """WITH over AS (
    SELECT id FROM (SELECT id, claimed_until, row_number() OVER (PARTITION BY webhook_id ORDER BY id DESC) AS n
                    FROM agent_webhook_outbox WHERE webhook_id = ANY($1)) r
    WHERE n > $2 AND (claimed_until IS NULL OR claimed_until < now())),
gone AS (DELETE FROM agent_webhook_outbox o USING over WHERE o.id = over.id RETURNING o.webhook_id)
UPDATE agent_webhooks w SET dropped = dropped + c.n FROM (SELECT webhook_id, count(*) AS n FROM gone
                                                         GROUP BY webhook_id) c WHERE w.id = c.webhook_id"""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The webhook's signature header value: HMAC-SHA256 over `timestamp.body` with its secret."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class Outbox:
    def __init__(
        self, pool: asyncpg.Pool, settings: AgentSettings, instance: str, *, resolve: Resolver = anyio.getaddrinfo
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.instance = instance
        self.resolve = resolve  # how host names are resolved (once per try; the request goes where it said)
        self._http = httpx.AsyncClient(
            timeout=10, follow_redirects=False, trust_env=False, verify=tls_context(trust_env=False)
        )
        self._wake = anyio.Event()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _do(self, method: str, sql: str, *args: Any) -> Any:
        return await query(self.pool, method, sql, *args)

    async def queue(self, owner: str, token: str | None, delivery: str, payload: dict[str, Any]) -> int:
        """Rows for the user's webhooks and the token's (`token`: the one that made the session), paused ones too
        (kept for their resumption), written before anything is sent; then each of those webhooks keeps at most
        `webhook_keep` waiting (the oldest beyond go, counted in its `dropped`). How many rows were written."""
        body = json.dumps(payload)
        async with transaction(self.pool) as connection:
            hooks = await connection.fetch(
                "INSERT INTO agent_webhook_outbox (webhook_id, delivery, body) SELECT id, $3, $4 "
                "FROM agent_webhooks WHERE (token IS NULL AND owner = $1) OR token = $2 "
                "ON CONFLICT DO NOTHING RETURNING webhook_id",
                owner,
                token,
                delivery,
                body,
            )
            if hooks:
                await connection.execute(_TRIM, [h[0] for h in hooks], max(1, self.settings.webhook_keep))
        if hooks:
            self.wake()
        return len(hooks)

    def wake(self) -> None:
        """Look for due deliveries now (a webhook resumed)."""
        self._wake.set()

    async def pending(self) -> list[dict[str, Any]]:
        """What waits to be delivered (oldest first): for reports and tests."""
        rows = await self._do(
            "fetch",
            "SELECT webhook_id, delivery, attempts, claimed_by, last_problem FROM agent_webhook_outbox ORDER BY id",
        )
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
                claimed = {}
            if claimed:
                async with anyio.create_task_group() as tg:
                    for rows in claimed.values():
                        tg.start_soon(self._run, rows)
                continue
            wait = None
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                wait = await self._next_due()
            with anyio.move_on_after(wait if wait is not None else self.settings.webhook_poll):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _next_due(self) -> float | None:
        """Seconds until the first waiting delivery of a webhook is due here, at most the poll interval."""
        try:
            soonest = await self._do(
                "fetchval",
                "SELECT EXTRACT(EPOCH FROM min(o.due_at) - now())::float8 FROM "
                "(SELECT DISTINCT ON (webhook_id) webhook_id, due_at, claimed_until "
                "FROM agent_webhook_outbox ORDER BY webhook_id, id) o "
                "JOIN agent_webhooks w ON w.id = o.webhook_id "
                "WHERE o.claimed_until IS NULL AND w.paused_at IS NULL",
            )
        except DatabaseError:
            soonest = None
        return max(0.01, min(self.settings.webhook_poll, soonest if soonest is not None else math.inf))

    async def _claim(self) -> dict[str, list[asyncpg.Record]]:
        """Webhooks whose first waiting delivery is due and no instance's, each locked while its run is claimed
        (so two instances never claim one webhook's deliveries at once), and of each the first `BATCH` waiting
        deliveries, in order: {webhook: its run}."""
        async with transaction(self.pool) as connection:
            hooks = await connection.fetch(
                "SELECT w.id FROM agent_webhooks w WHERE w.paused_at IS NULL AND EXISTS (SELECT 1 FROM "
                "agent_webhook_outbox o WHERE o.webhook_id = w.id AND o.due_at <= now()) "
                "ORDER BY w.id LIMIT $1 FOR UPDATE OF w SKIP LOCKED",
                BATCH,
            )
            if not hooks:
                return {}
            rows = await connection.fetch(  # (a statement after the lock: it sees every claim made before)
                "UPDATE agent_webhook_outbox o SET claimed_by = $1, claimed_until = now() + make_interval(secs => "
                "$2), attempts = o.attempts + 1 FROM agent_webhooks w WHERE w.id = o.webhook_id AND o.id IN ("
                "  SELECT id FROM (SELECT q.id, row_number() OVER run AS n, first_value(q.due_at <= now() AND "
                "  (q.claimed_until IS NULL OR q.claimed_until < now())) OVER run AS ready FROM "
                "  agent_webhook_outbox q WHERE q.webhook_id = ANY($3) WINDOW run AS (PARTITION BY q.webhook_id "
                "  ORDER BY q.id)) r WHERE r.ready AND r.n <= $4) "
                "RETURNING o.id, o.delivery, o.body, o.attempts, w.id AS webhook_id, w.url, w.secret",
                self.instance,
                float(self.settings.webhook_claim),
                [h[0] for h in hooks],
                BATCH,
            )
        runs: dict[str, list[asyncpg.Record]] = {}
        for row in sorted(rows, key=lambda r: r["id"]):
            runs.setdefault(row["webhook_id"], []).append(row)
        return runs

    async def _run(self, rows: list[asyncpg.Record]) -> None:
        """One webhook's run, in order: a delivery that is to be tried again later (or that paused the webhook)
        stops it, and the rest are let go untried, for the next claim."""
        for n, row in enumerate(rows):
            if not await self._try(row):
                rest = [r["id"] for r in rows[n + 1 :]]
                if rest:
                    try:
                        await self._do(
                            "execute",
                            "UPDATE agent_webhook_outbox SET claimed_by = NULL, claimed_until "
                            "= NULL, attempts = attempts - 1 WHERE id = ANY($1) AND claimed_by "
                            "= $2",
                            rest,
                            self.instance,
                        )
                    except DatabaseError as e:  # their claims lapse
                        log.warning("webhook %s: deliveries not let go: %s", row["webhook_id"], e)
                return

    async def _try(self, row: asyncpg.Record) -> bool:
        """One try of one delivery; then the row is gone (delivered, or given up on: True, the run goes on) or
        due again later, or kept for when the webhook it paused is resumed (False)."""
        body = row["body"].encode()
        stamp = str(int(time.time()))
        final = row["attempts"] >= max(1, self.settings.webhook_retries)
        try:
            target = await pinned(
                row["url"], https_only=False, loopback=self.settings.loopback_receivers, resolve=self.resolve
            )
            url, host, extensions = target.request()
            answer = await self._http.post(
                url,
                content=body,
                extensions=extensions,
                headers={
                    **host,
                    "Content-Type": "application/json",
                    "X-Frobozz-Timestamp": stamp,
                    "X-Frobozz-Signature": signature(row["secret"], stamp, body),
                    "X-Frobozz-Delivery": row["delivery"],
                },
            )
            problem = "" if answer.is_success else f"HTTP {answer.status_code}"
        except InputError as e:
            problem, final = str(e), True  # the address is refused now: trying again changes nothing
        except httpx.HTTPError as e:
            problem = f"{type(e).__name__}: {e}"[:300]
        try:
            if not problem:
                await self._done(row, "UPDATE agent_webhooks SET failures = 0 WHERE id = $1")
                return True
            if final:
                log.warning(
                    "webhook %s: a delivery failed after %d tries (%s)", row["webhook_id"], row["attempts"], problem
                )
                return not await self._failed(row, problem)
            await self._do(
                "execute",
                "UPDATE agent_webhook_outbox SET claimed_by = NULL, claimed_until = NULL, "
                "last_problem = $3, due_at = now() + make_interval(secs => $2) "
                "WHERE id = $1 AND claimed_by = $4",
                row["id"],
                self.settings.webhook_backoff * 2 ** (row["attempts"] - 1),
                problem,
                self.instance,
            )
        except DatabaseError as e:  # the claim lapses and the delivery is made again: at least once, never lost
            log.warning("webhook %s: the delivery's outcome is not recorded: %s", row["webhook_id"], e)
        return False

    async def _failed(self, row: asyncpg.Record, problem: str) -> bool:
        """A delivery failed its last try: counted against the webhook; enough in a row pause it, saying why, and
        the delivery is kept for its resumption (True); else it is given up on."""
        reason = f"{self.settings.webhook_pause_after} deliveries in a row failed; the last: {problem}"
        async with transaction(self.pool) as connection:
            paused = await connection.fetchval(
                "UPDATE agent_webhooks SET failures = failures + 1, paused_at = CASE WHEN failures + 1 >= $2 "
                "THEN now() END, paused_reason = CASE WHEN failures + 1 >= $2 THEN $3 END WHERE id = $1 AND "
                "EXISTS (SELECT 1 FROM agent_webhook_outbox WHERE id = $4 AND claimed_by = $5) "
                "RETURNING paused_at IS NOT NULL",
                row["webhook_id"],
                self.settings.webhook_pause_after,
                reason,
                row["id"],
                self.instance,
            )
            if paused:
                await connection.execute(
                    "UPDATE agent_webhook_outbox SET claimed_by = NULL, claimed_until = NULL, "
                    "last_problem = $2 WHERE id = $1",
                    row["id"],
                    problem,
                )
            elif paused is not None:
                await connection.execute("DELETE FROM agent_webhook_outbox WHERE id = $1", row["id"])
        return bool(paused)

    async def _done(self, row: asyncpg.Record, update: str, *args: Any) -> None:
        """The row is gone and the webhook's record updated, at once (only while this instance's claim holds)."""
        async with transaction(self.pool) as connection:
            gone = await connection.fetchval(
                "DELETE FROM agent_webhook_outbox WHERE id = $1 AND claimed_by = $2 RETURNING 1",
                row["id"],
                self.instance,
            )
            if gone:
                await connection.execute(update, row["webhook_id"], *args)
