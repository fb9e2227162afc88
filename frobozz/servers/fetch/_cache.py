"""An on-disk cache of successful fetches: fresh for a TTL, then revalidated with ETag/Last-Modified."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from frobozz._files import atomic_write

from ._http import Fetched


class Cache:
    def __init__(self, directory: Path, ttl: float) -> None:
        self.dir = directory
        self.ttl = ttl

    def _paths(self, url: str, accept: str) -> tuple[Path, Path]:
        key = hashlib.sha256(f"{accept}\n{url}".encode()).hexdigest()
        return self.dir / f"{key}.json", self.dir / f"{key}.body"

    def load(self, url: str, accept: str) -> tuple[Fetched, float] | None:
        """A cached response and its age in seconds, or None."""
        meta_path, body_path = self._paths(url, accept)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            body = body_path.read_bytes()
        except (OSError, ValueError):
            return None
        fetched = Fetched(
            url=url,
            final_url=meta["final_url"],
            status=meta["status"],
            headers=meta["headers"],
            body=body,
            capped=meta.get("capped", False),
            from_cache=True,
        )
        return fetched, time.time() - meta["stored"]

    def store(self, fetched: Fetched, accept: str) -> None:
        if fetched.status != 200:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        meta_path, body_path = self._paths(fetched.url, accept)
        meta = {
            "url": fetched.url,
            "final_url": fetched.final_url,
            "status": fetched.status,
            "headers": fetched.headers,
            "capped": fetched.capped,
            "stored": time.time(),
        }
        atomic_write(body_path, fetched.body)
        atomic_write(meta_path, json.dumps(meta).encode())  # last: a meta file always has its body

    def touch(self, fetched: Fetched, accept: str) -> None:
        """A 304 said the copy is still good: it is fresh again from now."""
        self.store(fetched, accept)

    def urls(self) -> list[str]:
        """The URLs fetched and kept here, the most recent first (copies from before URLs were kept: their
        final URL)."""
        found: list[tuple[float, str]] = []
        for path in self.dir.glob("*.json"):
            try:
                meta = json.loads(path.read_text(encoding="utf-8"))
                found.append((float(meta["stored"]), str(meta.get("url") or meta["final_url"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a damaged entry is fetched again when asked for
        return list(dict.fromkeys(url for _, url in sorted(found, reverse=True)))

    @staticmethod
    def validators(fetched: Fetched) -> dict[str, str]:
        headers = {}
        if "etag" in fetched.headers:
            headers["If-None-Match"] = fetched.headers["etag"]
        if "last-modified" in fetched.headers:
            headers["If-Modified-Since"] = fetched.headers["last-modified"]
        return headers
