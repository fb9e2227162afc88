"""One mail made into an item: from, to, subject, date, a short plain-text excerpt and its attachments
by name and size; the full text for a file. HTML is read as text with its scripts and styles left out.
A mail that cannot be read becomes a skipped item with the reason, never an exception."""

from __future__ import annotations

import email
import email.policy
from datetime import datetime
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser

from ._items import Item, clean

EXCERPT = 600
BODY_CHARS = 200_000


class _Text(HTMLParser):
    SKIP = frozenset({"script", "style", "head", "template", "noscript"})
    BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_text(html: str) -> str:
    """The readable text of an HTML mail body (tags dropped, scripts and styles left out)."""
    parser = _Text()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # noqa: BLE001 - html.parser is lenient; anything it still refuses is left out
        pass
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _header(message: EmailMessage, name: str) -> str:
    try:
        return str(message.get(name, "") or "")
    except Exception:  # noqa: BLE001 - a header the parser cannot decode is shown as missing
        return ""


def _body(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    if not isinstance(content, str):
        return ""
    return html_text(content) if part.get_content_type() == "text/html" else content


def mail_item(raw: bytes, *, source: str, key: str) -> Item:
    """One raw mail as an Item: its headers and text cleaned and capped; a mail that cannot be read is an Item
    saying so."""
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        subject = clean(_header(message, "Subject"), 300) or "(no subject)"
        sender, to = clean(_header(message, "From"), 300), clean(_header(message, "To"), 500)
        when: datetime | None = None
        try:
            when = parsedate_to_datetime(_header(message, "Date")) if _header(message, "Date") else None
        except (TypeError, ValueError):
            when = None
        text = _body(message)
        attachments = []
        for part in message.iter_attachments():
            payload = part.get_payload(decode=True)
            name = clean(part.get_filename() or "(unnamed)", 200)
            attachments.append(f"{name} ({len(payload) if isinstance(payload, bytes) else 0} bytes)")
    except Exception as e:  # noqa: BLE001 - malformed MIME of any kind: a record, not a crash
        return Item(
            source=source,
            key=key,
            title="(unreadable mail)",
            skipped=f"the mail could not be read: {type(e).__name__}: {clean(str(e), 200)}",
        )
    fields = [("from", sender), ("to", to), ("subject", subject)]
    if when is not None:
        fields.append(("date", when.isoformat(timespec="seconds")))
    if attachments:
        fields.append(("attachments", "; ".join(attachments)[:1000]))
    header = "\n".join(f"{n}: {v}" for n, v in fields if v)
    return Item(
        source=source,
        key=key,
        title=subject,
        at=when,
        fields=tuple((n, v) for n, v in fields if v),
        excerpt=clean(text, EXCERPT),
        body=f"{header}\n\n{text[:BODY_CHARS]}",
    )
