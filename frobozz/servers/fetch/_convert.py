"""Turn a fetched body into what a model reads: Markdown for pages, lists for feeds, text for PDFs,
pretty JSON, plain text as it is, and images as pictures (resized) with their real size stated."""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from ._http import Fetched
from .exceptions import UnsupportedError

_FEED_TYPES = {"application/rss+xml", "application/atom+xml", "application/feed+json", "application/rdf+xml"}
_TEXT_TYPES = {"text/plain", "text/csv", "text/x-python", "application/javascript", "text/javascript", "text/css"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_-]+)""", re.IGNORECASE)  # on 4 kB only
_TAG = re.compile(r"<[^<>]*>")
MAX_IMAGE_PIXELS = 50_000_000
MAX_TITLE = 500
MARKUP_DEPTH = 120  # below this, a page is kept as text: markdownify recurses a few frames a level
log = logging.getLogger("frobozz.fetch")


@dataclass(frozen=True)
class Converted:
    text: str
    title: str | None = None
    image: bytes | None = None
    image_mime: str | None = None


def decode(fetched: Fetched) -> str:
    """The body as text: the declared charset, else an HTML meta charset, else detection."""
    body = fetched.body
    candidates = [fetched.charset]
    if fetched.content_type in ("text/html", "application/xhtml+xml"):
        meta = _META_CHARSET.search(body[:4096])
        candidates.append(meta.group(1).decode("ascii") if meta else None)
    for charset in candidates:
        if charset:
            try:
                return body.decode(charset)
            except (LookupError, UnicodeDecodeError):
                continue
    from charset_normalizer import from_bytes

    best = from_bytes(body).best()
    return str(best) if best is not None else body.decode("utf-8", "replace")


def _parse_html(html: str) -> tuple[Any, bool]:
    """The page as an lxml tree (libxml2's HTML parser: linear time, however broken the markup), or None; and
    whether the parser stopped early, at markup nested deeper than it keeps.

    Regexes over hostile HTML backtrack (an unclosed tag repeated makes them quadratic or worse), and
    Python's html.parser is quadratic on unclosed tags too."""
    from lxml import etree

    parser = etree.HTMLParser(recover=True, no_network=True, remove_comments=True, huge_tree=True)
    try:
        root = etree.fromstring(html, parser)  # huge_tree: 2,048 levels of nesting kept, not 256
    except (etree.LxmlError, ValueError):
        return None, True
    last = parser.error_log.last_error
    return root, last is not None and last.type_name == "ERR_RESOURCE_LIMIT"


def _plain_text(html: str) -> str:
    """The text of markup no parser kept whole: tags dropped (each match stops at the next `<` or `>`, so this
    is linear), entities decoded."""
    import html as entities

    lines = entities.unescape(_TAG.sub(" ", html)).splitlines()
    return "\n".join(" ".join(line.split()) for line in lines)


def _title(root: Any) -> str | None:
    element = root.find(".//title") if root is not None else None
    title = " ".join("".join(element.itertext()).split())[:MAX_TITLE] if element is not None else ""
    return title or None


def markdown_alternate(html: str, base: str) -> str | None:
    """The URL of a Markdown version the page declares (`<link rel="alternate" type="text/markdown">`); a link
    whose address cannot be read is skipped (the page itself is still read)."""
    import httpx

    root, _ = _parse_html(html)
    if root is None:
        return None
    for link in root.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        kind = (link.get("type") or "").split(";")[0].strip().lower()
        href = (link.get("href") or "").strip()
        if "alternate" not in rel or kind != "text/markdown" or not href:
            continue
        try:
            return str(httpx.URL(base).join(href))
        except (httpx.InvalidURL, ValueError) as e:
            log.info("skipped the page's Markdown link %r: %s", href[:200], e)
    return None


def _whole_page(root: Any, cut: bool, html: str) -> str:
    """The whole page as Markdown, without scripts and styles; markup nested too deep for that as text."""
    from lxml import etree
    from markdownify import markdownify

    if root is None or cut:  # the parser gave up on part of the page: all of its text, without the markup
        return re.sub(r"\n{3,}", "\n\n", _plain_text(html)).strip()
    etree.strip_elements(root, "script", "style", "noscript", etree.Comment, with_tail=False)
    for deep in root.xpath("/*" * MARKUP_DEPTH):  # the markup nested deeper than this: its text only
        text = "".join(deep.itertext())
        for child in list(deep):
            deep.remove(child)
        deep.text = text
    try:
        text = markdownify(etree.tostring(root, encoding="unicode", method="html"), heading_style="ATX")
    except RecursionError:  # markdownify recursed too deep all the same: the text without the markup
        text = _plain_text(etree.tostring(root, encoding="unicode", method="html"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _html(html: str, url: str) -> Converted:
    import trafilatura

    root, cut = _parse_html(html)
    title = _title(root)
    try:
        text = trafilatura.extract(
            html,
            url=url,
            output_format="markdown",
            include_links=True,
            include_tables=True,
            include_images=False,
            favor_recall=True,
        )
    except RecursionError:
        text = None
    if not text or len(text) < 40:  # trafilatura found no main content: take the whole page
        text = _whole_page(root, cut, html)
    return Converted(f"# {title}\n\n{text}" if title and not text.startswith("# ") else text, title)


def _feed(data: bytes) -> Converted:
    import feedparser

    feed = feedparser.parse(data)
    title = feed.feed.get("title")
    lines = [f"# {title or 'Feed'}", ""]
    for entry in feed.entries:
        date = entry.get("published") or entry.get("updated") or ""
        summary = re.sub(r"<[^>]+>", "", entry.get("summary", "")[:5000]).strip()  # bounded: quadratic on stray <
        lines.append(f"- **{entry.get('title', '(untitled)')}**" + (f" ({date})" if date else ""))
        if entry.get("link"):
            lines.append(f"  {entry['link']}")
        if summary:
            lines.append(f"  {summary[:500]}")
    if not feed.entries:
        lines.append("(no entries)")
    return Converted("\n".join(lines), title)


def _pdf(data: bytes) -> Converted:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        title = (reader.metadata.title if reader.metadata else None) or None
        pages = [f"--- page {n} ---\n{(page.extract_text() or '').strip()}" for n, page in enumerate(reader.pages, 1)]
    except (PdfReadError, ValueError, KeyError, TypeError) as e:
        raise UnsupportedError(f"the PDF cannot be read: {e}") from e
    return Converted("\n\n".join(pages) or "(the PDF has no text)", title)


def _image(data: bytes, px: int) -> Converted:
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        image.thumbnail((px, px))
        out = io.BytesIO()
        image.convert("RGBA" if image.mode in ("RGBA", "LA", "P") else "RGB").save(out, format="PNG")
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError, ValueError) as e:
        raise UnsupportedError(f"the image cannot be read: {e}") from e
    shown = image.size
    return Converted(
        f"Image, {width}x{height} pixels (shown at {shown[0]}x{shown[1]}).", None, out.getvalue(), "image/png"
    )


def convert(fetched: Fetched, *, raw: bool, image_px: int) -> Converted:
    kind = fetched.content_type
    if kind.startswith("image/"):
        return _image(fetched.body, image_px)
    if kind == "application/pdf" or fetched.body[:5] == b"%PDF-":
        return _pdf(fetched.body)
    text = decode(fetched)
    if raw:
        return Converted(text)
    head = text[:500].lstrip().lower()
    if kind in _FEED_TYPES or (kind in ("application/xml", "text/xml") and ("<rss" in head or "<feed" in head)):
        return _feed(fetched.body)
    if kind in ("text/html", "application/xhtml+xml") or (not kind and head.startswith(("<!doctype html", "<html"))):
        return _html(text, fetched.final_url)
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return Converted(json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except (ValueError, RecursionError):  # not JSON, or nested too deep to parse: the text as it came
            return Converted(text)
    if kind in ("text/markdown", "text/x-markdown") or kind in _TEXT_TYPES or kind.startswith("text/") or not kind:
        return Converted(text)
    if kind in ("application/xml", "text/xml"):
        return Converted(text)
    raise UnsupportedError(
        f"cannot read {kind} content: fetch reads web pages, Markdown, text, JSON, feeds, PDFs and images"
    )


def page(text: str, start: int, max_length: int) -> tuple[str, int | None]:
    """The part of `text` from `start`, cut at a clean boundary; and where the next part starts."""
    if start >= len(text):
        return "", None
    end = start + max_length
    if end >= len(text):
        return text[start:], None
    window = text[start:end]
    for mark in ("\n\n", "\n", ". ", " "):
        cut = window.rfind(mark)
        if cut > max_length // 2:
            end = start + cut + len(mark)
            break
    return text[start:end], end


def github_raw(url: str, github: str, raw: str) -> tuple[str, bool] | None:
    """The raw URL for a GitHub file or repository link, and whether it is a repository's README."""
    github = github.rstrip("/")
    if not url.startswith(github + "/"):
        return None
    parts = [p for p in url[len(github) + 1 :].split("?")[0].split("#")[0].split("/") if p]
    if len(parts) == 2:
        return f"{raw.rstrip('/')}/{parts[0]}/{parts[1]}/HEAD/README.md", True
    if len(parts) >= 5 and parts[2] in ("blob", "raw"):
        return f"{raw.rstrip('/')}/{parts[0]}/{parts[1]}/{'/'.join(parts[3:])}", False
    return None
