"""Notifications when a question waits or a turn ends: Web Push (VAPID, RFC 8030/8291 through pywebpush) to
a browser's subscription, per session or per user, and webhooks per user, signed (HMAC-SHA256 over
`timestamp.body`), retried with a doubling backoff, and paused with a record after failing again and again.

Only public addresses are reached (a URL whose host resolves to a private, loopback, link-local or metadata
address is refused, when it is registered and again when it is called), and push endpoints only over
https; with `loopback_receivers` (tests, local development) 127.0.0.1 too. Nothing from the payload is logged."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
import asyncpg
import httpx
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02, b64urlencode
from pywebpush import WebPushException, webpush_async

from ._events import Done, Logged, Question
from ._store import query
from .exceptions import InputError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent.notify")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("100.100.100.200"),
             ipaddress.ip_address("fd00:ec2::254")}


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
                or ip.is_unspecified or ip in _METADATA)


async def checked_url(url: Any, *, https_only: bool, loopback: bool) -> str:
    """`url` when it may be called: http(s), a host, every address it resolves to public (or loopback, when
    allowed); else a clear InputError."""
    if not isinstance(url, str) or len(url) > 2000:
        raise InputError("the URL is a string of at most 2000 characters")
    parts = urlsplit(url)
    local_http = loopback and parts.scheme == "http" and parts.hostname in ("127.0.0.1", "::1", "localhost")
    if parts.scheme not in (("https",) if https_only else ("https", "http")) and not local_http:
        raise InputError(f"the URL must be {'https' if https_only else 'http or https'}: {url[:100]!r}")
    if not parts.hostname or parts.username or parts.password:
        raise InputError(f"the URL needs a host (and no user or password): {url[:100]!r}")
    try:
        infos = await anyio.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                                        type=socket.SOCK_STREAM)
    except OSError as e:
        raise InputError(f"{parts.hostname[:100]} does not resolve: {e}") from e
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not _public(ip) and not (loopback and ip.is_loopback):
            raise InputError(f"{parts.hostname[:100]} resolves to {ip}, a private address: refused")
    if parts.scheme == "http" and not all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback
                                          for i in infos):
        raise InputError("plain http only to this machine (loopback); elsewhere https")
    return url


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The webhook's signature header value: HMAC-SHA256 over `timestamp.body` with its secret."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def summary(session_id: str, logged: Logged) -> dict[str, Any] | None:
    """What a notification says of an event (a waiting question, a finished turn); None for the others."""
    event = logged.event
    if isinstance(event, Question):
        first = event.questions[0] if event.questions else {}
        return {"type": "question", "session_id": session_id, "seq": logged.seq, "question_id": event.question_id,
                "title": "A question is waiting", "body": str(first.get("question", ""))[:200],
                "question": str(first.get("question", "")),
                "actions": [{"action": str(o.get("label", ""))[:40], "title": str(o.get("label", ""))[:40]}
                            for o in (first.get("options") or [])[:2] if isinstance(o, dict)]}
    if isinstance(event, Done):
        return {"type": "done", "session_id": session_id, "seq": logged.seq, "title": "The turn is done",
                "body": (event.result or "")[:200], "is_error": event.is_error}
    return None


class Notifier:
    def __init__(self, pool: asyncpg.Pool, settings: AgentSettings) -> None:
        self.pool = pool
        self.settings = settings
        self._vapid: tuple[Vapid02, str] | None = None
        self._http = httpx.AsyncClient(timeout=10, follow_redirects=False)

    async def aclose(self) -> None:
        await self._http.aclose()

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
                public = b64urlencode(made.public_key.public_bytes(serialization.Encoding.X962,
                                                                   serialization.PublicFormat.UncompressedPoint))
                await self._do("execute", "INSERT INTO agent_vapid (id, private_pem, public_key) VALUES (1, $1, $2) "
                                          "ON CONFLICT DO NOTHING", made.private_pem().decode(), public)
                row = await self._do("fetchrow", "SELECT private_pem, public_key FROM agent_vapid WHERE id = 1")
            self._vapid = (Vapid02.from_pem(row["private_pem"].encode()), row["public_key"])
        return self._vapid

    async def subscribe(self, owner: str, session_id: str | None, subscription: Any) -> str:
        if not isinstance(subscription, dict) or not isinstance(subscription.get("keys"), dict):
            raise InputError('a subscription is {"endpoint": URL, "keys": {"p256dh": …, "auth": …}} (a browser\'s '
                             "PushSubscription as JSON)")
        keys = subscription["keys"]
        if not all(isinstance(keys.get(k), str) and 0 < len(keys[k]) < 200 for k in ("p256dh", "auth")):
            raise InputError("the subscription's keys p256dh and auth are base64url strings")
        endpoint = await checked_url(subscription.get("endpoint"), https_only=True,
                                     loopback=self.settings.loopback_receivers)
        subscription_id = secrets.token_hex(16)
        await self._do("execute", "INSERT INTO agent_push_subscriptions (id, owner, session_id, endpoint, p256dh, auth) "
                                  "VALUES ($1, $2, $3, $4, $5, $6)", subscription_id, owner, session_id, endpoint,
                       keys["p256dh"], keys["auth"])
        return subscription_id

    async def unsubscribe(self, subscription_id: str, owners: list[str] | None) -> bool:
        return bool(await self._do("fetchval", "DELETE FROM agent_push_subscriptions WHERE id = $1 AND ($2::text[] IS "
                                               "NULL OR owner = ANY($2)) RETURNING 1", subscription_id, owners))

    async def _push(self, row: asyncpg.Record, payload: dict[str, Any]) -> None:
        vapid, _ = await self.vapid()
        info = {"endpoint": row["endpoint"], "keys": {"p256dh": row["p256dh"], "auth": row["auth"]}}
        try:
            await checked_url(row["endpoint"], https_only=True, loopback=self.settings.loopback_receivers)
            await webpush_async(info, json.dumps(payload), vapid_private_key=vapid, ttl=3600, timeout=10,
                                vapid_claims={"sub": self.settings.push_subject})
        except WebPushException as e:
            status = getattr(e.response, "status", None) or getattr(e.response, "status_code", None)
            if status in (404, 410):  # the browser let the subscription go
                await self._do("execute", "DELETE FROM agent_push_subscriptions WHERE id = $1", row["id"])
            log.warning("a push to subscription %s failed (%s)", row["id"], status)
        except (InputError, OSError, Exception) as e:  # noqa: BLE001 - one subscription does not stop the others
            log.warning("a push to subscription %s failed: %s", row["id"], type(e).__name__)

    # -- webhooks ---------------------------------------------------------------------------------------
    async def add_webhook(self, owner: str, url: Any) -> dict[str, Any]:
        url = await checked_url(url, https_only=False, loopback=self.settings.loopback_receivers)
        hook = {"id": secrets.token_hex(16), "url": url, "secret": secrets.token_urlsafe(32)}
        await self._do("execute", "INSERT INTO agent_webhooks (id, owner, url, secret) VALUES ($1, $2, $3, $4)",
                       hook["id"], owner, url, hook["secret"])
        return hook  # the secret is shown this once

    async def webhooks(self, owners: list[str] | None) -> list[dict[str, Any]]:
        rows = await self._do("fetch", "SELECT id, owner, url, failures, paused_at, paused_reason FROM agent_webhooks "
                                       "WHERE $1::text[] IS NULL OR owner = ANY($1) ORDER BY created_at", owners)
        return [{"id": r["id"], "user": r["owner"], "url": r["url"], "failures": r["failures"],
                 "paused_at": r["paused_at"].isoformat() if r["paused_at"] else None,
                 "paused_reason": r["paused_reason"]} for r in rows]

    async def remove_webhook(self, webhook_id: str, owners: list[str] | None) -> bool:
        return bool(await self._do("fetchval", "DELETE FROM agent_webhooks WHERE id = $1 AND ($2::text[] IS NULL OR "
                                               "owner = ANY($2)) RETURNING 1", webhook_id, owners))

    async def resume_webhook(self, webhook_id: str, owners: list[str] | None) -> bool:
        return bool(await self._do("fetchval", "UPDATE agent_webhooks SET paused_at = NULL, paused_reason = NULL, "
                                               "failures = 0 WHERE id = $1 AND ($2::text[] IS NULL OR owner = ANY($2)) "
                                               "RETURNING 1", webhook_id, owners))

    async def _call(self, row: asyncpg.Record, payload: dict[str, Any]) -> None:
        """One delivery, retried with a doubling backoff; after the last try it counts as a failure (and enough
        failures in a row pause the webhook, saying why)."""
        body = json.dumps(payload).encode()
        problem = ""
        for attempt in range(max(1, self.settings.webhook_retries)):
            if attempt:
                await anyio.sleep(self.settings.webhook_backoff * 2 ** (attempt - 1))
            stamp = str(int(time.time()))
            try:
                await checked_url(row["url"], https_only=False, loopback=self.settings.loopback_receivers)
                answer = await self._http.post(row["url"], content=body, headers={
                    "Content-Type": "application/json", "X-Frobozz-Timestamp": stamp,
                    "X-Frobozz-Signature": signature(row["secret"], stamp, body), "X-Frobozz-Delivery": payload["id"]})
                if answer.is_success:
                    await self._do("execute", "UPDATE agent_webhooks SET failures = 0 WHERE id = $1", row["id"])
                    return
                problem = f"HTTP {answer.status_code}"
            except InputError as e:
                problem = str(e)
                break
            except httpx.HTTPError as e:
                problem = f"{type(e).__name__}: {e}"[:300]
        log.warning("webhook %s: a delivery failed after retries (%s)", row["id"], problem)
        await self._do("execute", "UPDATE agent_webhooks SET failures = failures + 1, "
                                  "paused_at = CASE WHEN failures + 1 >= $2 THEN now() END, "
                                  "paused_reason = CASE WHEN failures + 1 >= $2 THEN $3 END WHERE id = $1",
                       row["id"], self.settings.webhook_pause_after,
                       f"{self.settings.webhook_pause_after} deliveries in a row failed; the last: {problem}")

    # -- what happened --------------------------------------------------------------------------------------
    async def notify(self, session_id: str, owner: str, logged: Logged) -> None:
        """Tell the session's and its user's push subscriptions and the user's webhooks (each at once, apart)."""
        payload = summary(session_id, logged)
        if payload is None:
            return
        payload["id"] = f"{session_id}:{logged.seq}"
        pushes = await self._do("fetch", "SELECT id, endpoint, p256dh, auth FROM agent_push_subscriptions WHERE owner "
                                         "= $1 AND (session_id IS NULL OR session_id = $2)", owner, session_id)
        hooks = await self._do("fetch", "SELECT id, url, secret FROM agent_webhooks WHERE owner = $1 AND "
                                        "paused_at IS NULL", owner)
        async with anyio.create_task_group() as tg:
            for row in pushes:
                tg.start_soon(self._push, row, payload)
            for row in hooks:
                tg.start_soon(self._call, row, {**payload, "user": owner})
