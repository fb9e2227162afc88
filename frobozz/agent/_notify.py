"""Notifications when a question waits or a turn ends: Web Push (VAPID, RFC 8030/8291 through pywebpush) to
a browser's subscription, per session or per user, and webhooks per user or per token (the sessions a scoped
token made), queued in the Postgres outbox (`_outbox`: signed, retried with a doubling backoff by whichever
instance is alive, in order, paused with a record after failing again and again, and what happens while paused
kept, bounded, for the webhook's resumption).

Only public addresses are reached (`_addresses`: a host that resolves to a private, loopback, link-local or
metadata address is refused, when it is registered and again at each try, and the request goes to the address
checked), and push endpoints only over https; with `loopback_receivers` (tests, local development) 127.0.0.1
too. Nothing from the payload is logged."""

from __future__ import annotations

import json
import logging
import secrets
import socket
from typing import Any

import aiohttp
import anyio
import asyncpg
from aiohttp.abc import AbstractResolver, ResolveResult
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02, b64urlencode
from pywebpush import WebPushException, webpush_async

from frobozz._ip import Address

from ._addresses import Resolver, checked_url, pinned
from ._events import Done, Logged, Question
from ._outbox import Outbox
from ._store import query, transaction
from .exceptions import InputError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent.notify")
# whose webhooks a caller may see and change, with $2 its `owners` and $3 its `token`: a user's of `owners` (null:
# any user's), and a token's when it is `token` (null: any token's; a scoped token passes its own name)
MINE = (
    "((token IS NULL AND ($2::text[] IS NULL OR owner = ANY($2))) OR (token IS NOT NULL AND ($3::text IS NULL "
    "OR token = $3)))"
)


def summary(session_id: str, logged: Logged) -> dict[str, Any] | None:
    """What a notification says of an event (a waiting question, a finished turn); None for the others."""
    event = logged.event
    if isinstance(event, Question):
        first = event.questions[0] if event.questions else {}
        return {
            "type": "question",
            "session_id": session_id,
            "seq": logged.seq,
            "question_id": event.question_id,
            "title": "A question is waiting",
            "body": str(first.get("question", ""))[:200],
            "question": str(first.get("question", "")),
            "actions": [
                {"action": str(o.get("label", ""))[:40], "title": str(o.get("label", ""))[:40]}
                for o in (first.get("options") or [])[:2]
                if isinstance(o, dict)
            ],
        }
    if isinstance(event, Done):
        return {
            "type": "done",
            "session_id": session_id,
            "seq": logged.seq,
            "title": "The turn is done",
            "body": (event.result or "")[:200],
            "is_error": event.is_error,
        }
    return None


class _OneAddress(AbstractResolver):
    """aiohttp's resolver for one push: the address the guard checked, whatever the name says now."""

    def __init__(self, address: Address) -> None:
        self.address = address

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            {
                "hostname": host,
                "host": str(self.address),
                "port": port,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
                "family": socket.AF_INET6 if self.address.version == 6 else socket.AF_INET,
            }
        ]

    async def close(self) -> None:
        return None


class Notifier:
    def __init__(
        self, pool: asyncpg.Pool, settings: AgentSettings, instance: str = "", *, resolve: Resolver = anyio.getaddrinfo
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.resolve = resolve
        self._vapid: tuple[Vapid02, str] | None = None
        self.outbox = Outbox(pool, settings, instance or secrets.token_hex(8), resolve=resolve)

    async def aclose(self) -> None:
        await self.outbox.aclose()

    async def _do(self, method: str, sql: str, *args: Any) -> Any:
        return await query(self.pool, method, sql, *args)

    # -- Web Push ---------------------------------------------------------------------------------------
    async def vapid(self) -> tuple[Vapid02, str]:
        """The service's VAPID key (made once, the same for every instance) and its public key, base64url."""
        if self._vapid is None:
            row = await self._do("fetchrow", "SELECT private_pem, public_key FROM agent_vapid WHERE id = 1")
            if row is None:
                made = Vapid02()
                made.generate_keys()
                public = b64urlencode(
                    made.public_key.public_bytes(
                        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
                    )
                )
                await self._do(
                    "execute",
                    "INSERT INTO agent_vapid (id, private_pem, public_key) VALUES (1, $1, $2) ON CONFLICT DO NOTHING",
                    made.private_pem().decode(),
                    public,
                )
                row = await self._do("fetchrow", "SELECT private_pem, public_key FROM agent_vapid WHERE id = 1")
            self._vapid = (Vapid02.from_pem(row["private_pem"].encode()), row["public_key"])
        return self._vapid

    async def subscribe(self, owner: str, session_id: str | None, subscription: Any) -> str:
        if not isinstance(subscription, dict) or not isinstance(subscription.get("keys"), dict):
            raise InputError(
                'a subscription is {"endpoint": URL, "keys": {"p256dh": …, "auth": …}} (a browser\'s '
                "PushSubscription as JSON)"
            )
        keys = subscription["keys"]
        if not all(isinstance(keys.get(k), str) and 0 < len(keys[k]) < 200 for k in ("p256dh", "auth")):
            raise InputError("the subscription's keys p256dh and auth are base64url strings")
        endpoint = await checked_url(
            subscription.get("endpoint"),
            https_only=True,
            loopback=self.settings.loopback_receivers,
            resolve=self.resolve,
        )
        subscription_id = secrets.token_hex(16)
        await self._do(
            "execute",
            "INSERT INTO agent_push_subscriptions (id, owner, session_id, endpoint, p256dh, auth) "
            "VALUES ($1, $2, $3, $4, $5, $6)",
            subscription_id,
            owner,
            session_id,
            endpoint,
            keys["p256dh"],
            keys["auth"],
        )
        return subscription_id

    async def unsubscribe(self, subscription_id: str, owners: list[str] | None) -> bool:
        return bool(
            await self._do(
                "fetchval",
                "DELETE FROM agent_push_subscriptions WHERE id = $1 AND ($2::text[] IS "
                "NULL OR owner = ANY($2)) RETURNING 1",
                subscription_id,
                owners,
            )
        )

    async def _push(self, row: asyncpg.Record, payload: dict[str, Any]) -> None:
        vapid, _ = await self.vapid()
        info = {"endpoint": row["endpoint"], "keys": {"p256dh": row["p256dh"], "auth": row["auth"]}}
        try:
            target = await pinned(
                row["endpoint"], https_only=True, loopback=self.settings.loopback_receivers, resolve=self.resolve
            )
            connector = aiohttp.TCPConnector(resolver=_OneAddress(target.address))
            async with aiohttp.ClientSession(connector=connector, trust_env=False) as http:
                await webpush_async(
                    info,
                    json.dumps(payload),
                    vapid_private_key=vapid,
                    ttl=3600,
                    timeout=10,
                    vapid_claims={"sub": self.settings.push_subject},
                    aiohttp_session=http,
                )
        except WebPushException as e:
            status = getattr(e.response, "status", None) or getattr(e.response, "status_code", None)
            if status in (404, 410):  # the browser let the subscription go
                await self._do("execute", "DELETE FROM agent_push_subscriptions WHERE id = $1", row["id"])
            log.warning("a push to subscription %s failed (%s)", row["id"], status)
        except (InputError, OSError, Exception) as e:  # noqa: BLE001 - one subscription does not stop the others
            log.warning("a push to subscription %s failed: %s", row["id"], type(e).__name__)

    # -- webhooks ---------------------------------------------------------------------------------------
    async def add_webhook(self, owner: str | None, url: Any, *, token: str | None = None) -> dict[str, Any]:
        """A webhook for a user's sessions (`owner`) or for the sessions a token made (`token`): one of the two."""
        if (owner is None) == (token is None):
            raise InputError("a webhook is for a user or for a token (one of the two)")
        url = await checked_url(url, https_only=False, loopback=self.settings.loopback_receivers, resolve=self.resolve)
        hook = {"id": secrets.token_hex(16), "url": url, "secret": secrets.token_urlsafe(32)}
        await self._do(
            "execute",
            "INSERT INTO agent_webhooks (id, owner, token, url, secret) VALUES ($1, $2, $3, $4, $5)",
            hook["id"],
            owner,
            token,
            url,
            hook["secret"],
        )
        return hook  # the secret is shown this once

    async def webhooks(self, owners: list[str] | None, token: str | None = None) -> list[dict[str, Any]]:
        rows = await self._do(
            "fetch",
            "SELECT id, owner, token, url, failures, paused_at, paused_reason, dropped, "
            "(SELECT count(*) FROM agent_webhook_outbox o WHERE o.webhook_id = w.id) AS "
            f"waiting FROM agent_webhooks w WHERE id = coalesce($1, id) AND {MINE} "
            "ORDER BY created_at, id",
            None,
            owners,
            token,
        )
        return [
            {
                "id": r["id"],
                "user": r["owner"],
                "token": r["token"],
                "url": r["url"],
                "failures": r["failures"],
                "paused_at": r["paused_at"].isoformat() if r["paused_at"] else None,
                "paused_reason": r["paused_reason"],
                "waiting": r["waiting"],
                "dropped": r["dropped"],
            }
            for r in rows
        ]

    async def remove_webhook(self, webhook_id: str, owners: list[str] | None, token: str | None = None) -> bool:
        return bool(
            await self._do(
                "fetchval",
                f"DELETE FROM agent_webhooks WHERE id = $1 AND {MINE} RETURNING 1",
                webhook_id,
                owners,
                token,
            )
        )

    async def resume_webhook(
        self, webhook_id: str, owners: list[str] | None, token: str | None = None
    ) -> dict[str, int] | None:
        """Deliver to it again, beginning with the deliveries kept while it was paused (in the order of their
        events, each try counted anew); None when there is no such webhook of the caller's. What it says: how
        many wait, and how many were let go over the bound since the last resumption."""
        async with transaction(self.pool) as connection:
            dropped = await connection.fetchval(
                f"SELECT dropped FROM agent_webhooks WHERE id = $1 AND {MINE} FOR UPDATE", webhook_id, owners, token
            )
            if dropped is None:
                return None
            await connection.execute(
                "UPDATE agent_webhooks SET paused_at = NULL, paused_reason = NULL, "
                "failures = 0, dropped = 0 WHERE id = $1",
                webhook_id,
            )
            waiting = await connection.fetch(
                "UPDATE agent_webhook_outbox SET attempts = 0, due_at = now(), "
                "last_problem = NULL WHERE webhook_id = $1 AND (claimed_until IS NULL "
                "OR claimed_until < now()) RETURNING 1",
                webhook_id,
            )
        self.outbox.wake()
        return {"waiting": len(waiting), "dropped": dropped}

    # -- what happened --------------------------------------------------------------------------------------
    async def notify(self, session_id: str, owner: str, logged: Logged, *, token: str | None = None) -> None:
        """Tell the session's and its user's push subscriptions, the user's webhooks and those of the token that
        made the session (each at once, apart)."""
        payload = summary(session_id, logged)
        if payload is None:
            return
        payload["id"] = f"{session_id}:{logged.seq}"
        pushes = await self._do(
            "fetch",
            "SELECT id, endpoint, p256dh, auth FROM agent_push_subscriptions WHERE owner "
            "= $1 AND (session_id IS NULL OR session_id = $2)",
            owner,
            session_id,
        )
        await self.outbox.queue(owner, token, payload["id"], {**payload, "user": owner, "token": token})
        # (kept before any push is tried)
        async with anyio.create_task_group() as tg:
            for row in pushes:
                tg.start_soon(self._push, row, payload)
