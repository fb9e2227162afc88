"""Feed: an RSS or Atom feed polled over HTTP (feedparser reads both), one message per new entry.

An entry's key is a hash of its id (or link, or title and summary when a feed gives neither), so a
feed that reorders or rewrites its page delivers nothing twice. `since` leaves out entries dated
before it: a routine made today does not act on a feed's archive. A feed cut off on the way gives nothing:
feedparser reads what it can of it, and an entry cut off before its id is another key, fired again."""

from __future__ import annotations

import calendar
import hashlib
import re
from datetime import UTC, datetime
from typing import Any, Unpack
from xml.sax import SAXException

import anyio
import feedparser
import httpx

from frobozz._tls import tls_context

from ._items import Item, clean
from ._polling import Polling, PollingOptions, ProducerError

MAX_BYTES = 5_000_000
EXCERPT = 600


def _text(html: str) -> str:
    from ._mail import html_text

    return html_text(html)


def _date(entry: Any) -> datetime | None:
    for name in ("published_parsed", "updated_parsed"):
        parsed = entry.get(name)
        if parsed:
            return datetime.fromtimestamp(calendar.timegm(parsed), UTC)
    return None


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_ROOT = re.compile(r"<([^\s/>?!][^\s/>]*)")


def _unended(body: bytes, encoding: str) -> str | None:
    """The root element a feed does not close (it was cut off), or None. feedparser's complaint alone cannot
    say: it names the first fault only, and a feed with a control character in a title is read whole."""
    try:
        text = body.decode(encoding or "utf-8", "replace")
    except LookupError:
        text = body.decode("utf-8", "replace")
    text = _COMMENT.sub("", text)
    root = _ROOT.search(text)
    if root and re.search(rf"</{re.escape(root.group(1))}\s*>", text[root.end() :]):
        return None
    return root.group(1) if root else ""


class Feed(Polling):
    """`Feed("https://example.org/atom.xml", "Summarise this post.")`."""

    name = "feed"

    def __init__(
        self,
        url: str,
        prompt: str,
        *,
        source: str | None = None,
        since: datetime | None = None,
        timeout: float = 20.0,
        max_bytes: int = MAX_BYTES,
        **kwargs: Unpack[PollingOptions],
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ProducerError(f"a feed is an http:// or https:// URL, not {clean(url, 80)!r}")
        super().__init__(prompt, source=source or url, **kwargs)
        self.url, self.since, self.timeout, self.max_bytes = url, since, timeout, max_bytes

    async def fetch(self) -> bytes:
        """The feed's body, whole within `timeout` seconds (httpx's timeout is per read: a server that sends
        a byte a second would hold the fetch for ever)."""
        try:
            with anyio.fail_after(self.timeout):
                return await self._get()
        except TimeoutError as e:
            raise ProducerError(f"the feed could not be fetched: no whole answer within {self.timeout:g} s") from e

    async def _get(self) -> bytes:
        try:
            async with (
                httpx.AsyncClient(timeout=self.timeout, follow_redirects=True, verify=tls_context()) as client,
                client.stream("GET", self.url, headers={"User-Agent": "frobozz-routines"}) as response,
            ):
                if response.status_code >= 400:
                    raise ProducerError(f"the feed answered HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise ProducerError(f"the feed is larger than {self.max_bytes} bytes")
                return bytes(body)
        except httpx.HTTPError as e:
            raise ProducerError(f"the feed could not be fetched: {type(e).__name__}: {e}") from e

    def items(self, body: bytes) -> list[Item]:
        """The feed's entries, oldest first (by date where they have one, else in reverse page order)."""
        parsed = feedparser.parse(body)
        problem = parsed.get("bozo_exception") if parsed.get("bozo") else None
        if not parsed.get("version") and not parsed.entries:
            raise ProducerError("not an RSS or Atom feed" + (f": {clean(str(problem), 200)}" if problem else ""))
        if isinstance(problem, SAXException) and (root := _unended(body, parsed.get("encoding", ""))) is not None:
            raise ProducerError(
                f"the feed is not well-formed XML (it ends before its </{clean(root, 80)}>, cut off on the way): "
                "nothing in it was taken"
            )
        found = []
        for order, entry in enumerate(reversed(parsed.entries)):
            ident = entry.get("id") or entry.get("link") or f"{entry.get('title', '')}\n{entry.get('summary', '')}"
            key = hashlib.sha256(ident.encode("utf-8", "replace")).hexdigest()[:32]
            at = _date(entry)
            if self.since is not None and at is not None and at < self.since:
                continue
            title = clean(entry.get("title", ""), 300) or "(untitled)"
            summary = _text(entry.get("summary", "") or "")
            content = "\n\n".join(_text(c.get("value", "")) for c in entry.get("content", []) or [])
            fields = [
                ("feed", clean(parsed.feed.get("title", ""), 200) or clean(self.url, 200)),
                ("title", title),
                ("link", clean(entry.get("link", ""), 500)),
            ]
            if at is not None:
                fields.append(("date", at.isoformat(timespec="seconds")))
            found.append(
                (
                    at or datetime.max.replace(tzinfo=UTC),
                    order,
                    Item(
                        source=self.source,
                        key=key,
                        title=title,
                        at=at,
                        fields=tuple((n, v) for n, v in fields if v),
                        excerpt=clean(summary or content, EXCERPT),
                        body=content or summary or None,
                    ),
                )
            )
        return [item for _, _, item in sorted(found, key=lambda f: (f[0], f[1]))]

    async def poll(self) -> list[Item]:
        return await self.new(self.items(await self.fetch()))
