"""Turn a fetched body into what a model reads: Markdown for pages, lists for feeds, text for PDFs,
pretty JSON, plain text as it is, and images as pictures (resized) with their real size stated."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

from ._http import Fetched
from .exceptions import UnsupportedError

_FEED_TYPES = {"application/rss+xml", "application/atom+xml", "application/feed+json", "application/rdf+xml"}
_TEXT_TYPES = {"text/plain", "text/csv", "text/x-python", "application/javascript", "text/javascript", "text/css"}
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_-]+)""", re.IGNORECASE)
_MD_ALTERNATE = re.compile(r"""<link[^>]+rel=["']alternate["'][^>]+type=["']text/markdown["'][^>]*>""", re.IGNORECASE)
_HREF = re.compile(r"""href=["']([^"']+)["']""", re.IGNORECASE)
MAX_IMAGE_PIXELS = 50_000_000


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


def markdown_alternate(html: str, base: str) -> str | None:
    """The URL of a Markdown version the page declares (`<link rel="alternate" type="text/markdown">`)."""
    import httpx

    link = _MD_ALTERNATE.search(html)
    href = _HREF.search(link.group(0)) if link else None
    return str(httpx.URL(base).join(href.group(1))) if href else None


def _html(html: str, url: str) -> Converted:
    import trafilatura

    title_match = _TITLE.search(html)
    title = " ".join(title_match.group(1).split()) if title_match else None
    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_images=False,
        favor_recall=True,
    )
    if not text or len(text) < 40:  # trafilatura found no main content: take the whole page
        from markdownify import markdownify

        body = re.sub(r"<(script|style|noscript)[^>]*>.*?</\1>", "", html, flags=re.IGNORECASE | re.DOTALL)
        text = re.sub(r"\n{3,}", "\n\n", markdownify(body, heading_style="ATX")).strip()
    return Converted(f"# {title}\n\n{text}" if title and not text.startswith("# ") else text, title)


def _feed(data: bytes) -> Converted:
    import feedparser

    feed = feedparser.parse(data)
    title = feed.feed.get("title")
    lines = [f"# {title or 'Feed'}", ""]
    for entry in feed.entries:
        date = entry.get("published") or entry.get("updated") or ""
        summary = re.sub(r"<[^>]+>", "", entry.get("summary", "")).strip()
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
        except ValueError:
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
