"""The transcript mirror: what claude writes to its transcript (`--session-mirror` frames), appended to a
session store by one background task, so the store never slows the event stream.

Frames are buffered as they come and written in order: at the end of each turn (batched), or after every
frame (eager), or when the buffer passes 500 entries or 1 MiB. A failed append is tried three times in
all (0.2 s, then 0.8 s apart); a stalled one is given up after `timeout` and not retried (it may still
land). Either way the batch is reported through `on_error`, and the conversation goes on: claude's own
transcript on disk already holds it. A failed batch (the store surely did not take it) is held, and the
session's later entries behind it, and written first at the next write: a database that was away for a
turn leaves no hole in the session a machine resumes from it (up to HELD_MAX entries a session; past that
the oldest are given up, said in the log).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import orjson

from ._session_store import Entry, SessionKey, SessionStore, key_for_path

log = logging.getLogger("frobozz.engine.mirror")
FlushMode = Literal["batched", "eager"]
MAX_ENTRIES = 500
MAX_BYTES = 1 << 20
BACKOFF = (0.2, 0.8)
HELD_MAX = 10_000  # entries a session keeps to write again once the store is back


class TranscriptMirror:
    def __init__(
        self,
        store: SessionStore,
        *,
        projects_dir: Path,
        project_key: str | None = None,
        flush: FlushMode = "batched",
        timeout: float = 60.0,
        on_error: Callable[[SessionKey | None, str], None] = lambda key, error: None,
    ) -> None:
        self.store = store
        self.projects_dir = projects_dir
        self.project_key = project_key
        self.eager = flush == "eager"
        self.timeout = timeout
        self.on_error = on_error
        self.appended = 0  # entries the store has taken
        self._pending: list[tuple[str, list[Entry]]] = []
        self._held: dict[str, list[Entry]] = {}  # path -> entries the store did not take, in order
        self._entries = self._bytes = 0
        self._wake = anyio.Event()
        self._lock = anyio.Lock()  # one writer at a time: the background task, or a drain
        self._closing = False

    # -- from the read loop: never awaits the store -------------------------------------------------
    def enqueue(self, frame: dict[str, Any]) -> None:
        path, entries = frame.get("filePath"), frame.get("entries")
        if not isinstance(path, str) or not isinstance(entries, list) or not entries:
            return
        self._pending.append((path, entries))
        self._entries += len(entries)
        self._bytes += len(orjson.dumps(entries))
        if self.eager or self._entries > MAX_ENTRIES or self._bytes > MAX_BYTES:
            self._wake.set()

    def flush_soon(self) -> None:
        """The turn ended: write what is buffered, in the background."""
        if self._pending:
            self._wake.set()

    # -- the writer ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Write batches as they are asked for, in order, until closed (then once more)."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            async with self._lock:
                await self._write_pending()
            if self._closing:
                return

    async def drain(self, timeout: float) -> bool:  # noqa: ASYNC109 - False when the store is slow, not an error
        """Write everything buffered, here and now (after a write under way; the background task may be
        gone, cancelled with its task group); False if the store took longer than `timeout`."""
        with anyio.move_on_after(timeout):
            async with self._lock:
                await self._write_pending()
            return True
        return False

    def close(self) -> None:
        self._closing = True
        self._wake.set()

    async def _write_pending(self) -> None:
        batch, self._pending, self._entries, self._bytes = self._pending, [], 0, 0
        by_path: dict[str, list[Entry]] = {path: [] for path in self._held}  # what was held goes first
        for path, entries in batch:
            by_path.setdefault(path, []).extend(entries)
        for path, entries in by_path.items():
            key = key_for_path(path, self.projects_dir, self.project_key)
            if key is None:
                log.warning("a mirrored transcript outside %s was not stored: %s", self.projects_dir, path)
                continue
            held = self._held.pop(path, [])
            writing = held + entries
            written = await self._append(key, writing)
            if written == "failed":  # the store surely did not take them: first at the next write
                if len(writing) > HELD_MAX:
                    log.error(
                        "%d transcript entries of session %s are given up: %d more are held",
                        len(writing) - HELD_MAX,
                        key["session_id"],
                        HELD_MAX,
                    )
                self._held[path] = writing[-HELD_MAX:]
            elif written == "stored" and held:
                log.info(
                    "%d transcript entries of session %s, held while the store failed, are stored",
                    len(held),
                    key["session_id"],
                )

    @property
    def held(self) -> int:
        """Entries the store failed to take, to be written first at the next write."""
        return sum(len(entries) for entries in self._held.values())

    async def _append(self, key: SessionKey, entries: list[Entry]) -> Literal["stored", "failed", "stalled"]:
        error, stalled = "", False
        for attempt in range(len(BACKOFF) + 1):
            if attempt:
                await anyio.sleep(BACKOFF[attempt - 1])
            try:
                with anyio.fail_after(self.timeout if math.isfinite(self.timeout) else None):
                    await self.store.append(key, entries)
                self.appended += len(entries)
                return "stored"
            except TimeoutError:
                error, stalled = f"the store did not answer within {self.timeout:g} s", True
                break  # it may still land: a retry could write it twice
            except Exception as e:  # noqa: BLE001 - the store is the caller's code
                error = f"{type(e).__name__}: {e}"
                log.debug("append to the session store failed (attempt %d): %s", attempt + 1, error)
        said = "were not stored" if stalled else "were not stored yet (held, to be written first at the next write)"
        log.error("%d transcript entries of session %s %s: %s", len(entries), key["session_id"], said, error)
        self.on_error(key, error)
        return "stalled" if stalled else "failed"
