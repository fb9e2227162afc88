"""Inbox: an IMAP4rev1 mailbox (over TLS, or plain on loopback), one message per new mail.

A mail's key is the mailbox's UIDVALIDITY and the mail's UID, which IMAP promises never to reuse.
Mail is read with BODY.PEEK (nothing is marked seen), its size asked first so a huge one is skipped
with a record instead of fetched. Between looks, IDLE where the server has it (a new mail wakes the
producer at once), else a sleep of the poll interval. Credentials are the caller's and appear in no
message, log line or error."""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import logging
import re
from typing import Self, Unpack
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

import aioimaplib
import anyio

from ..._tls import system_tls_context
from ._items import Item, clean
from ._mail import mail_item
from ._polling import Polling, PollingOptions, ProducerError

log = logging.getLogger("frobozz.engine.producers")
# aioimaplib logs every line it receives (mail from outside) at DEBUG and INFO: never into our logs.
logging.getLogger("aioimaplib").setLevel(logging.WARNING)
MAX_BYTES = 10_000_000
_SIZE = re.compile(rb"UID (\d+) RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+) UID (\d+)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # in a quoted string, a line break would end the command


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
        raise ProducerError(f"plain imap:// sends the password in the clear: use {_with_tls(parts)[:200]}")
    folder = unquote(parts.path.strip("/")) or "INBOX"
    user = unquote(parts.username) if parts.username else None
    return tls, parts.hostname, port or (993 if tls else 143), folder, user


def _with_tls(parts: SplitResult) -> str:
    """The same URL with imaps://, its user, host and folder kept (the port too, unless IMAP's own 143): the one
    to use instead (imaps://HOST alone was then refused as naming no user)."""
    netloc = parts.netloc.rsplit(":", 1)[0] if parts.port == 143 else parts.netloc
    return urlunsplit(("imaps", netloc, parts.path, parts.query, parts.fragment))


def mailbox_name(folder: str) -> str:
    """A folder's name as IMAP4rev1 has it (RFC 3501 5.1.3, modified UTF-7): printable ASCII as it is, but `&`
    as `&-`; every run of other characters as `&`, the base64 of its UTF-16BE (`,` for `/`, no padding), `-`.
    So "Boîte d'envoi" is `Bo&AO4-te d'envoi`, and "R&D" is `R&-D`."""
    out: list[str] = []
    run: list[str] = []

    def shift_back() -> None:
        if run:
            coded = base64.b64encode("".join(run).encode("utf-16-be")).decode("ascii").rstrip("=")
            out.append("&" + coded.replace("/", ",") + "-")
            run.clear()

    for char in folder:
        if " " <= char <= "~":
            shift_back()
            out.append("&-" if char == "&" else char)
        else:
            run.append(char)
    shift_back()
    return "".join(out)


def check_mailbox(user: str, folder: str) -> None:
    """ProducerError for a user or a folder that would break into the IMAP commands: the user is sent as a quoted
    string (printable ASCII), the folder encoded (`mailbox_name`), where a control character still ends it."""
    if not re.fullmatch(r"[ -~]+", user):
        raise ProducerError(f"the inbox's user {user[:80]!r} cannot be sent to IMAP: printable ASCII only")
    if _CONTROL.search(folder):
        raise ProducerError(
            f"the inbox's folder {folder[:80]!r} has control characters, which IMAP cannot take (its names are "
            "printable ASCII, other scripts encoded)"
        )


class _Connection:
    """One logged-in, selected IMAP connection, kept between looks; `lost` once the server or the network
    dropped it (a command on it would wait its whole timeout: it is made again instead)."""

    def __init__(self) -> None:
        self.client: aioimaplib.IMAP4 | None = None
        self.selected: list[bytes] = []
        self.lost = False

    def on_lost(self, exc: Exception | None) -> None:
        self.lost = True


class Inbox(Polling):
    """`Inbox("imaps://mail.example.org/INBOX", "Triage this mail.", user=..., password=...)`.

    Two connections are kept open between looks (`aclose()` or `async with` logs them out): one that looks
    (NOOP, then UID SEARCH on the folder it selected once), one that waits in IDLE. A look then costs a
    round trip or two instead of a connection, a login and a SELECT; a dropped one is made again."""

    name = "inbox"

    def __init__(
        self,
        url: str,
        prompt: str,
        *,
        user: str | None = None,
        password: str,
        source: str | None = None,
        max_bytes: int = MAX_BYTES,
        timeout: float = 30.0,
        idle: bool = True,
        **kwargs: Unpack[PollingOptions],
    ) -> None:
        self.tls, self.host, self.port, self.folder, in_url = parse_url(url)
        user = user or in_url
        if not user or not password:
            raise ProducerError("an inbox needs a user name and a password")
        check_mailbox(user, self.folder)
        self.user = user
        super().__init__(prompt, source=source or f"imap://{self.user}@{self.host}:{self.port}/{self.folder}", **kwargs)
        self._password, self.max_bytes, self.timeout, self.use_idle = password, max_bytes, timeout, idle
        self._looker: _Connection | None = None  # kept between polls
        self._idler: _Connection | None = None  # kept between waits
        self._last_uid: int | None = None  # the highest UID the last poll saw in the folder
        self.idled = False  # whether the last wait was an IDLE (for the benchmark and the tests)
        self.connections = 0  # connections made (a kept one is made once)

    def __repr__(self) -> str:  # never the password
        return f"Inbox({self.source!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Log the kept connections out (shielded: it runs when the producer is being cancelled too)."""
        kept, self._looker, self._idler = [self._looker, self._idler], None, None
        with anyio.CancelScope(shield=True):
            for connection in kept:
                if connection is not None:
                    await self._close(connection)

    async def _connect(self) -> _Connection:
        where = f"{self.host}:{self.port}"
        connection = _Connection()
        try:
            client = (
                aioimaplib.IMAP4_SSL(
                    self.host,
                    self.port,
                    timeout=self.timeout,
                    ssl_context=system_tls_context(),
                    conn_lost_cb=connection.on_lost,
                )
                if self.tls
                else aioimaplib.IMAP4(self.host, self.port, timeout=self.timeout, conn_lost_cb=connection.on_lost)
            )
            connection.client = client
            self.connections += 1
            await client.wait_hello_from_server()
        except (TimeoutError, OSError, aioimaplib.Abort) as e:
            await self._close(connection)
            raise ProducerError(f"the IMAP server at {where} is not there: {type(e).__name__}: {e}") from e
        try:
            answer = await client.login(aioimaplib.quoted(self.user or ""), self._password)  # (only the password is)
        except (TimeoutError, OSError, aioimaplib.Abort) as e:
            await self._close(connection)
            raise ProducerError(f"the IMAP server at {where} dropped the login: {type(e).__name__}") from e
        if answer.result != "OK":
            await self._close(connection)
            raise ProducerError(f"the IMAP server at {where} refused the login of {clean(self.user or '', 80)}")
        try:
            answer = await client.select(aioimaplib.quoted(mailbox_name(self.folder)))  # "Sent Items", "R&-D"
        except (TimeoutError, OSError, aioimaplib.Abort) as e:
            await self._close(connection)
            raise ProducerError(f"the IMAP server at {where} dropped the connection: {type(e).__name__}") from e
        if answer.result != "OK":
            await self._close(connection)
            raise ProducerError(f"no folder {clean(self.folder, 80)!r} at {where}")
        connection.selected = [bytes(line) for line in answer.lines if isinstance(line, (bytes, bytearray))]
        return connection

    @staticmethod
    async def _close(connection: _Connection) -> None:
        client, connection.client = connection.client, None
        if client is None:
            return
        try:
            if not connection.lost and not client.has_pending_idle() and client.get_state() in ("AUTH", "SELECTED"):
                with anyio.move_on_after(5), contextlib.suppress(Exception):  # it is being dropped anyway
                    await client.logout()
        finally:
            transport = getattr(client.protocol, "transport", None)
            if transport is not None:
                transport.close()

    @staticmethod
    def _code(connection: _Connection, name: bytes) -> int | None:
        for line in connection.selected:
            found = re.search(rb"\[" + name + rb" (\d+)\]", line)
            if found:
                return int(found.group(1))
        return None

    async def poll(self) -> list[Item]:
        """The mails not yet handled, oldest first, on the kept connection (made again if it was dropped)."""
        for attempt in (1, 2):
            kept = self._looker is not None and not self._looker.lost
            if not kept:
                if self._looker is not None:
                    await self._close(self._looker)
                self._looker = None
                self._looker = await self._connect()
            connection = self._looker
            assert connection is not None and connection.client is not None
            try:
                if kept:  # the folder as it is now (new mail is reported to a session on its next command)
                    await self._ok(await connection.client.noop(), "NOOP")
                return await self._new_mail(connection)
            except (TimeoutError, OSError, aioimaplib.Abort, _Dropped) as e:
                self._looker = None
                await self._close(connection)
                if kept and attempt == 1:
                    continue  # a kept connection the server had closed: once more on a new one
                raise ProducerError(f"the IMAP connection failed: {type(e).__name__}: {e}") from e
        raise AssertionError("unreachable")

    @staticmethod
    async def _ok(answer: aioimaplib.Response, what: str) -> aioimaplib.Response:
        if answer.result == "BYE" or any(
            bytes(line).startswith(b"* BYE") for line in answer.lines if isinstance(line, (bytes, bytearray))
        ):
            raise _Dropped(f"the server ended the session during {what}")
        return answer

    async def _new_mail(self, connection: _Connection) -> list[Item]:
        client = connection.client
        assert client is not None
        validity = self._code(connection, b"UIDVALIDITY")
        answer = await self._ok(await client.uid_search("ALL"), "SEARCH")
        if answer.result != "OK":
            raise ProducerError("the IMAP server refused to search the folder")
        uids = sorted({int(u) for line in answer.lines[:-1] for u in bytes(line).split() if u.isdigit()})
        self._last_uid = max(uids, default=0)
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
                items.append(
                    Item(
                        source=self.source,
                        key=key,
                        title=f"(mail {uid}: {sizes[uid]} bytes)",
                        skipped=f"the mail is {sizes[uid]} bytes, over the limit of {self.max_bytes}",
                    )
                )
                continue
            answer = await client.uid("fetch", str(uid), "BODY.PEEK[]")
            raw = next((bytes(line) for line in answer.lines if isinstance(line, bytearray)), None)
            if answer.result != "OK" or raw is None:
                continue  # expunged between the search and the fetch
            items.append(mail_item(raw, source=self.source, key=key))
        return items

    async def wait(self) -> None:
        """Until the folder may have new mail: IDLE's word from the server (on a connection kept for it), or the
        poll interval. A mail that came since the last poll saw the folder ends the wait at once."""
        self.idled = False
        if not self.use_idle:
            await anyio.sleep(self.interval)
            return
        connection = self._idler
        if connection is None or connection.lost:
            if connection is not None:
                await self._close(connection)
            self._idler = None
            try:
                connection = self._idler = await self._connect()
            except ProducerError as e:
                log.warning("inbox %s: %s", self.source, e)
                await anyio.sleep(self.interval)
                return
        client = connection.client
        assert client is not None
        done = False
        try:
            if self._last_uid is not None:  # mail came between the last look and now
                answer = await self._ok(await client.uid_search(f"UID {self._last_uid + 1}:*"), "SEARCH")
                newer = [int(u) for line in answer.lines[:-1] for u in bytes(line).split() if u.isdigit()]
                if max(newer, default=0) > self._last_uid:
                    self._last_uid = max(newer)  # said once: the next wait is an IDLE, even before a look
                    done = True
                    return
            if not client.has_capability("IDLE"):
                done = True
                await anyio.sleep(self.interval)
                return
            queue = client.protocol.idle_queue
            while not queue.empty():  # what the last IDLE left (the rest of its wake-up, its timer's stop)
                queue.get_nowait()
            self.idled = True
            idle = await client.idle_start(timeout=self.interval + 5)
            try:
                while True:
                    pushed = await client.wait_server_push(timeout=self.interval)
                    lines = pushed if isinstance(pushed, list) else [pushed]
                    if any(b"EXISTS" in bytes(p) for p in lines if isinstance(p, (bytes, bytearray))):
                        break
                    if connection.lost or any(
                        bytes(p).startswith(b"* BYE") for p in lines if isinstance(p, (bytes, bytearray))
                    ):
                        return
            except TimeoutError:
                pass
            finally:
                if client.has_pending_idle():
                    client.idle_done()
                with anyio.move_on_after(5):
                    await idle
            done = not connection.lost
        except (TimeoutError, OSError, aioimaplib.Abort, _Dropped) as e:
            log.warning("inbox %s: IDLE ended: %s", self.source, type(e).__name__)
        finally:
            if not done:  # dropped, failed, or cancelled mid-IDLE: a connection in an unknown state is not kept
                self._idler = None
                with anyio.CancelScope(shield=True):
                    await self._close(connection)


class _Dropped(Exception):
    """The server ended the session (BYE) on a kept connection."""
