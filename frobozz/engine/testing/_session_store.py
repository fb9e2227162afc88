"""A session store in memory: the engine's reference store, for tests and for trying the protocol out.
Nothing is kept past the process. `fail` and `stall` make it misbehave, as a store that is down or hangs."""

from __future__ import annotations

import copy
import time

import anyio

from ..._session_summary import fold_summary
from .._session_store import Entry, SessionKey, SessionListSubkeysKey, SessionStoreListEntry, SessionSummaryEntry


def _path(key: SessionKey | SessionListSubkeysKey) -> tuple[str, str, str]:
    subpath = key.get("subpath", "")  # only a SessionKey has one
    return key["project_key"], key["session_id"], subpath if isinstance(subpath, str) else ""


class InMemorySessionStore:
    """The reference SessionStore, in a dict, for tests: it can be told to fail or stall as a store that is down."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, str], list[Entry]] = {}
        self.appends = 0  # calls that were answered
        self.fail = False  # every call raises, as a store that is down
        self.stall = False  # every call hangs, as a store that does not answer
        self.stalled = 0  # calls hanging now
        self._mtimes: dict[tuple[str, str, str], int] = {}
        self._summaries: dict[tuple[str, str], SessionSummaryEntry] = {}
        self._clock = 0

    async def _misbehave(self) -> None:
        if self.stall:
            self.stalled += 1
            try:
                await anyio.sleep_forever()
            finally:
                self.stalled -= 1
        if self.fail:
            raise ConnectionError("the store is down")

    async def append(self, key: SessionKey, entries: list[Entry]) -> None:
        await self._misbehave()
        if not entries:
            return
        path = _path(key)
        known = {e.get("uuid") for e in self.entries.get(path, ()) if e.get("uuid")}
        self.entries.setdefault(path, []).extend(
            copy.deepcopy(e) for e in entries if not e.get("uuid") or e["uuid"] not in known
        )
        self._clock = max(int(time.time() * 1000), self._clock + 1)
        self._mtimes[path] = self._clock
        if not path[2]:
            summary = fold_summary(self._summaries.get(path[:2]), key, entries)
            self._summaries[path[:2]] = SessionSummaryEntry(
                session_id=summary["session_id"], mtime=self._clock, data=summary["data"]
            )
        self.appends += 1

    async def load(self, key: SessionKey) -> list[Entry] | None:
        await self._misbehave()
        found = self.entries.get(_path(key))
        return None if found is None else copy.deepcopy(found)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        await self._misbehave()
        return [
            {"session_id": s, "mtime": self._mtimes[(p, s, sub)]}
            for p, s, sub in self.entries
            if p == project_key and not sub
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        await self._misbehave()
        return [copy.deepcopy(s) for (p, _), s in self._summaries.items() if p == project_key]

    async def delete(self, key: SessionKey) -> None:
        await self._misbehave()
        project, session, subpath = _path(key)
        for path in [k for k in self.entries if k[:2] == (project, session) and (not subpath or k[2] == subpath)]:
            del self.entries[path]
            self._mtimes.pop(path, None)
        if not subpath:
            self._summaries.pop((project, session), None)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        await self._misbehave()
        return [sub for p, s, sub in self.entries if (p, s) == (key["project_key"], key["session_id"]) and sub]
