"""Inbox: an IMAP4rev1 mailbox (over TLS, or plain on loopback), one message per new mail.

A mail's key is the mailbox's UIDVALIDITY and the mail's UID, which IMAP promises never to reuse.
Mail is read with BODY.PEEK (nothing is marked seen), its size asked first so a huge one is skipped
with a record instead of fetched. Between looks, IDLE where the server has it (a new mail wakes the
producer at once), else a sleep of the poll interval. Credentials are the caller's and appear in no
message, log line or error."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import ssl
from typing import Unpack
from urllib.parse import unquote, urlsplit

import aioimaplib
import anyio

from ._items import Item, clean
from ._mail import mail_item
from ._polling import Polling, PollingOptions, ProducerError

log = logging.getLogger("frobozz.engine.producers")
# aioimaplib logs every line it receives (mail from outside) at DEBUG and INFO: never into our logs.
logging.getLogger("aioimaplib").setLevel(logging.WARNING)
MAX_BYTES = 10_000_000
_SIZE = re.compile(rb"UID (\d+) RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+) UID (\d+)")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def parse_url(url: str) -> tuple[bool, str, int, str, str | None]:
    """(tls, host, port, folder, user) of imaps://[user@]host[:port][/folder]; plain imap:// only on loopback."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ProducerError(f"not an IMAP URL: {e}") from e
    if parts.scheme not in ("imap", "imaps") or not parts.hostname:
        raise ProducerError("an inbox is an imaps://host[:port][/folder] URL (imap:// on loopback only)")
    if parts.password:
        raise ProducerError("put no password in the IMAP URL: give it in the environment or a file")
    tls = parts.scheme == "imaps"
    if not tls and not _loopback(parts.hostname):
        raise ProducerError(f"plain imap:// sends the password in the clear: use imaps://{parts.hostname}")
    folder = unquote(parts.path.strip("/")) or "INBOX"
    user = unquote(parts.username) if parts.username else None
    return tls, parts.hostname, port or (993 if tls else 143), folder, user


class Inbox(Polling):
    """`Inbox("imaps://mail.example.org/INBOX", "Triage this mail.", user=..., password=...)`."""

    name = "inbox"

    def __init__(self, url: str, prompt: str, *, user: str | None = None, password: str, source: str | None = None,
                 max_bytes: int = MAX_BYTES, timeout: float = 30.0, idle: bool = True, **kwargs: Unpack[PollingOptions]) -> None:
        self.tls, self.host, self.port, self.folder, in_url = parse_url(url)
        user = user or in_url
        if not user or not password:
            raise ProducerError("an inbox needs a user name and a password")
        self.user = user
        super().__init__(prompt, source=source or f"imap://{self.user}@{self.host}:{self.port}/{self.folder}",
                         **kwargs)
        self._password, self.max_bytes, self.timeout, self.use_idle = password, max_bytes, timeout, idle
        self._uidnext: int | None = None
        self.idled = False  # whether the last wait was an IDLE (for the benchmark and the tests)

    def __repr__(self) -> str:  # never the password
        return f"Inbox({self.source!r})"

    async def _connect(self) -> aioimaplib.IMAP4:
        where = f"{self.host}:{self.port}"
        try:
            client = (aioimaplib.IMAP4_SSL(self.host, self.port, timeout=self.timeout,
                                           ssl_context=ssl.create_default_context())
                      if self.tls else aioimaplib.IMAP4(self.host, self.port, timeout=self.timeout))
            await client.wait_hello_from_server()
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort) as e:
            raise ProducerError(f"the IMAP server at {where} is not there: {type(e).__name__}: {e}") from e
        try:
            answer = await client.login(self.user, self._password)
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort) as e:
            raise ProducerError(f"the IMAP server at {where} dropped the login: {type(e).__name__}") from e
        if answer.result != "OK":
            await self._close(client)
            raise ProducerError(f"the IMAP server at {where} refused the login of {clean(self.user, 80)}")
        answer = await client.select(self.folder)
        if answer.result != "OK":
            await self._close(client)
            raise ProducerError(f"no folder {clean(self.folder, 80)!r} at {where}")
        self._selected = answer.lines
        return client

    @staticmethod
    async def _close(client: aioimaplib.IMAP4) -> None:
        try:
            with anyio.move_on_after(5):
                await client.logout()
        except Exception:  # noqa: BLE001 - the connection is being dropped anyway
            pass

    def _code(self, name: bytes) -> int | None:
        for line in self._selected:
            found = re.search(rb"\[" + name + rb" (\d+)\]", bytes(line))
            if found:
                return int(found.group(1))
        return None

    async def poll(self) -> list[Item]:
        client = await self._connect()
        try:
            return await self._new_mail(client)
        except (OSError, asyncio.TimeoutError, aioimaplib.Abort) as e:
            raise ProducerError(f"the IMAP connection failed: {type(e).__name__}: {e}") from e
        finally:
            await self._close(client)

    async def _new_mail(self, client: aioimaplib.IMAP4) -> list[Item]:
        validity, self._uidnext = self._code(b"UIDVALIDITY"), self._code(b"UIDNEXT")
        answer = await client.uid_search("ALL")
        if answer.result != "OK":
            raise ProducerError("the IMAP server refused to search the folder")
        uids = sorted({int(u) for line in answer.lines[:-1] for u in bytes(line).split() if u.isdigit()})
        keys = {uid: f"{validity}:{uid}" for uid in uids}
        done = await self.deliveries.done(self.source, keys.values())
        new = [uid for uid in uids if keys[uid] not in done]
        if not new:
            return []
        sizes: dict[int, int] = {}
        answer = await client.uid("fetch", ",".join(map(str, new)), "(RFC822.SIZE)")
        for line in answer.lines:
            found = _SIZE.search(bytes(line)) if isinstance(line, (bytes, bytearray)) else None
            if found:
                uid, size = (found.group(1), found.group(2)) if found.group(1) else (found.group(4), found.group(3))
                sizes[int(uid)] = int(size)
        items = []
        for uid in new:
            key = keys[uid]
            if sizes.get(uid, 0) > self.max_bytes:
                items.append(Item(source=self.source, key=key, title=f"(mail {uid}: {sizes[uid]} bytes)",
                                  skipped=f"the mail is {sizes[uid]} bytes, over the limit of {self.max_bytes}"))
                continue
            answer = await client.uid("fetch", str(uid), "BODY.PEEK[]")
            raw = next((bytes(line) for line in answer.lines if isinstance(line, bytearray)), None)
            if answer.result != "OK" or raw is None:
                continue  # expunged between the search and the fetch
            items.append(mail_item(raw, source=self.source, key=key))
        return items

    async def wait(self) -> None:
        """Until the folder may have new mail: IDLE's word from the server, or the poll interval."""
        self.idled = False
        if not self.use_idle:
            await anyio.sleep(self.interval)
            return
        try:
            client = await self._connect()
        except ProducerError as e:
            log.warning("inbox %s: %s", self.source, e)
            await anyio.sleep(self.interval)
            return
        try:
            current = self._code(b"UIDNEXT")
            if self._uidnext is not None and (current or 0) > self._uidnext:
                self._uidnext = current
                return  # mail came between the last look and now
            self._uidnext = current
            if not client.has_capability("IDLE"):
                await anyio.sleep(self.interval)
                return
            self.idled = True
            idle = await client.idle_start(timeout=self.interval + 5)
            try:
                while True:
                    pushed = await client.wait_server_push(timeout=self.interval)
                    if any(b"EXISTS" in bytes(p) for p in (pushed if isinstance(pushed, list) else [pushed])
                           if isinstance(p, (bytes, bytearray))):
                        break
            except (asyncio.TimeoutError, TimeoutError):
                pass
            finally:
                if client.has_pending_idle():
                    client.idle_done()
                with anyio.move_on_after(5):
                    await idle
        except (OSError, aioimaplib.Abort) as e:
            log.warning("inbox %s: IDLE ended: %s", self.source, type(e).__name__)
        finally:
            await self._close(client)
