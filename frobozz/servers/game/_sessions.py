"""The game sessions one server holds, each in its own interpreter process.

With `game_shared_sessions` on (as `serve all --http` sets it), every change is shared (in Postgres when
a database is configured, else in the data directory), and a session this process does not hold, or
holds at an older state than the shared one, is picked up from there: any of several server processes
can answer any call. Each call on a session holds it (`hold`) from pick-up to share.

A full server (`max_sessions`) makes room for a new game, or for a shared session picked up again, by closing
the interpreter of the shared session used least recently that no call is using: its state is in the share,
so its next call picks it up again, as after a restart. A session that is not shared lives only here and is
never closed but by `end`."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from frobozz.games import GameError, GameLibrary, GameSession, GameSessionState

from ._shares import share_for
from .settings import Settings

__all__ = ["SessionLimitError", "Sessions"]

_ID = re.compile(r"[0-9a-f]{16}")


class SessionLimitError(GameError):
    pass


class Sessions:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.library = GameLibrary(settings)
        self.share = share_for(settings, self.library)
        self._sessions: dict[str, GameSession] = {}  # least recently used first
        self._calls: Counter[str] = Counter()  # the calls in `hold` per shared session id
        self._seen: dict[str, object] = {}  # the shared copy's mark this process holds
        self._opening = 0

    async def open(self, game: str) -> GameSession:
        story = self.library.find(game)  # refused here, before any process starts
        await self._make_room()
        self._opening += 1
        try:
            session = await GameSession.open(story, self.settings)
        finally:
            self._opening -= 1
        self._sessions[session.id] = session
        await self.changed(session)
        return session

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[GameSession]:
        """The session at its latest state, to this call alone until it has shared what it changed."""
        if self.share is None or not isinstance(session_id, str) or not _ID.fullmatch(session_id):
            yield self._held(session_id)
            return
        self._calls[session_id] += 1
        try:
            async with self.share.lock(session_id):
                session = await self._fresh(session_id)
                self._sessions.pop(session_id, None)
                self._sessions[session_id] = session  # (the most recently used: last)
                yield session
        finally:
            self._calls[session_id] -= 1
            if not self._calls[session_id]:
                del self._calls[session_id]

    async def changed(self, session: GameSession) -> None:
        """After a change (inside `hold`): share the session's state, when sessions are shared."""
        if self.share is not None and session.state is not GameSessionState.CLOSED:
            self._seen[session.id] = await self.share.save(session)

    async def end(self, session_id: str) -> GameSession:
        async with self.hold(session_id) as session:
            del self._sessions[session_id]
            self._seen.pop(session_id, None)
            if self.share is not None:
                await self.share.delete(session_id)
            await session.aclose()
            return session

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.aclose)
        if self.share is not None:
            await self.share.aclose()

    # -- inside ---------------------------------------------------------------------------------
    def _held(self, session_id: str) -> GameSession:
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.state is GameSessionState.CLOSED:  # (the others' ids are theirs alone: an id
            # is all that lets a client play a game, and one given a shared hub's token could take any listed)
            raise GameError(f"no game session {str(session_id)[:80]!r}; start one with new_game")
        return session

    def _full(self) -> bool:
        return len(self._sessions) + self._opening >= self.settings.max_sessions

    async def _make_room(self) -> None:
        """Room for one more session (taken by the caller before its next await): a shared session's interpreter
        closed if need be, else a SessionLimitError that says why none could be."""
        while self._full():
            if self.share is None:
                raise SessionLimitError(
                    f"{self.settings.max_sessions} games are open here, and a game that is not shared lives only "
                    "in this server (closing one would lose it): end one of yours with end_game"
                )
            idle = next((sid for sid in self._sessions if not self._calls[sid]), None)
            if idle is None:
                raise SessionLimitError(
                    f"{self.settings.max_sessions} games are open here and every one is in a call right now: "
                    "try again in a moment"
                )
            session = self._sessions.pop(idle)  # (its state is shared: its next call picks it up again)
            self._seen.pop(idle, None)
            await session.aclose(journal=False)

    async def _fresh(self, session_id: str) -> GameSession:
        """The session at its latest shared state: as held, or picked up; an error when it has ended."""
        assert self.share is not None
        session = self._sessions.get(session_id)
        mark = await self.share.mark(session_id)
        if mark is None:  # ended (by whichever process), or never shared
            if session is not None:
                del self._sessions[session_id]
                await session.aclose(journal=False)
            return self._held(session_id)
        if session is not None and self._seen.get(session_id) == mark:
            return session
        shared = await self.share.load(session_id)
        try:
            if session is None:
                await self._make_room()
                self._opening += 1
                try:
                    session = await GameSession.reopen(
                        shared.story, self.settings, session_id, shared.snapshot, shared.turns
                    )
                finally:
                    self._opening -= 1
            else:
                await session.resume(shared.snapshot, shared.turns, journal=False)
        except (KeyError, TypeError, ValueError) as e:
            raise GameError(f"game session {session_id} could not be picked up: {e}") from e
        self._seen[session_id] = shared.mark
        return session
