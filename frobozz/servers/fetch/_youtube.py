"""YouTube links → the video's transcript, with its title and timestamps (youtube-transcript-api).

The library speaks requests; its session gets an adapter that sends youtube.com to the configured
base URL (so tests and mirrors can stand in) and puts every request through the address guard."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx

from ._guard import resolve_sync
from .exceptions import FetchError
from .settings import Settings

_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HOSTS = {"www.youtube.com", "youtube.com", "m.youtube.com", "music.youtube.com"}


def video_id(url: str, base: str) -> str | None:
    """The video id of a YouTube watch, share or shorts link (or one on the configured base URL)."""
    parts = urlsplit(url)
    base_parts = urlsplit(base)
    on_base = (parts.scheme, parts.netloc) == (base_parts.scheme, base_parts.netloc)
    path = parts.path[len(base_parts.path.rstrip("/")) :] if on_base else parts.path
    if parts.netloc == "youtu.be":
        candidate = path.strip("/").split("/")[0]
    elif parts.netloc in _HOSTS or on_base:
        if path.rstrip("/") == "/watch":
            candidate = (parse_qs(parts.query).get("v") or [""])[0]
        elif path.startswith(("/shorts/", "/embed/", "/live/")):
            candidate = path.split("/")[2]
        else:
            return None
    else:
        return None
    return candidate if _ID.match(candidate) else None


def _stamp(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _transcript(vid: str, settings: Settings) -> tuple[str, str | None]:
    import requests
    from requests.adapters import HTTPAdapter
    from youtube_transcript_api import YouTubeTranscriptApi
    from youtube_transcript_api._errors import CouldNotRetrieveTranscript

    base = settings.fetch_youtube_url.rstrip("/")
    pages: list[str] = []

    class Guarded(HTTPAdapter):
        def send(self, request, **kwargs):
            if base != "https://www.youtube.com" and request.url.startswith("https://www.youtube.com"):
                request.url = base + request.url[len("https://www.youtube.com") :]
            resolve_sync(httpx.URL(request.url), settings)  # the guard, for every request the library makes
            kwargs["timeout"] = (settings.fetch_connect_timeout, settings.fetch_read_timeout)
            response = super().send(request, **kwargs)
            if "/watch" in request.url and not pages:
                pages.append(response.text[:200_000])
            return response

    session = requests.Session()
    session.headers["User-Agent"] = settings.fetch_user_agent
    session.mount("https://", Guarded())
    session.mount("http://", Guarded())
    try:
        fetched = YouTubeTranscriptApi(http_client=session).fetch(vid, languages=["en", "en-US", "en-GB"])
    except CouldNotRetrieveTranscript as e:
        raise FetchError(f"no transcript for YouTube video {vid}: {str(e).splitlines()[0:3]}") from e
    except requests.RequestException as e:
        raise FetchError(f"YouTube could not be reached: {e}") from e
    title_match = _TITLE.search(pages[0]) if pages else None
    title = re.sub(r"\s*-\s*YouTube$", "", " ".join(title_match.group(1).split())) if title_match else None
    lines = [f"# {title or f'YouTube video {vid}'}", "", f"Transcript ({fetched.language}):", ""]
    lines += [f"[{_stamp(s.start)}] {s.text}" for s in fetched.snippets]
    return "\n".join(lines), title


async def transcript(vid: str, settings: Settings) -> tuple[str, str | None]:
    with anyio.fail_after(settings.fetch_total_timeout):
        return await anyio.to_thread.run_sync(_transcript, vid, settings, abandon_on_cancel=True)
