"""The game sessions one server holds, each in its own interpreter process.

With `game_shared_sessions` on (as `serve all --http` sets it), every change is written to the
data directory, and a session this process does not hold, or holds at an older state than the
one on disk, is picked up from there: any of several server processes can answer any call."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import anyio

from frobozz._files import atomic_write
from frobozz.games import GameError, GameLibrary, GameSession, SessionState, read_story, replay_journal

from .settings import Settings

_ID = re.compile(r"[0-9a-f]{16}")
SHARED_UNDO = 10  # turns undo can reach back after another process picks a session up (~19 kB each)


class SessionLimitError(GameError):
    pass


class Sessions:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.library = GameLibrary(settings)
        self._sessions: dict[str, GameSession] = {}
        self._seen: dict[str, tuple[int, int]] = {}  # the shared file's (mtime, size) this process holds
        self._opening = 0
        self._lock = anyio.Lock()

    async def open(self, game: str) -> GameSession:
        story = self.library.find(game)  # refused here, before any process starts
        self._check_room()
        self._opening += 1
        try:
            session = await GameSession.open(story, self.settings)
        finally:
            self._opening -= 1
        self._sessions[session.id] = session
        self.changed(session)
        return session

    async def get(self, session_id: str) -> GameSession:
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if self.settings.game_shared_sessions and isinstance(session_id, str) and _ID.fullmatch(session_id):
            async with self._lock:
                session = await self._fresh(session_id, session)
        if session is None or session.state is SessionState.CLOSED:
            running = ", ".join(self._sessions) or "none"
            raise GameError(f"no game session {str(session_id)[:80]!r} (running: {running}); "
                            "start one with new_game")
        return session

    def changed(self, session: GameSession) -> None:
        """After a change: share the session's state, when sessions are shared."""
        if self.settings.game_shared_sessions and session.state is not SessionState.CLOSED:
            path = self._shared(session.id)
            snapshot = session.snapshot(undo=SHARED_UNDO)
            atomic_write(path, json.dumps({"story": str(session.story.path), "snapshot": snapshot}).encode())
            self._seen[session.id] = _mark(path)

    async def end(self, session_id: str) -> GameSession:
        session = await self.get(session_id)
        del self._sessions[session_id]
        self._shared(session_id).unlink(missing_ok=True)
        await session.aclose()
        return session

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.aclose)

    # -- inside ---------------------------------------------------------------------------------
    def _check_room(self) -> None:
        if len(self._sessions) + self._opening >= self.settings.max_sessions:
            raise SessionLimitError(f"{self.settings.max_sessions} games are already running: end one with "
                                    "end_game first")

    def _shared(self, session_id: str) -> Path:
        return self.settings.sessions_dir / f"{session_id}.live.json"

    async def _fresh(self, session_id: str, session: GameSession | None) -> GameSession | None:
        """The session at its latest shared state: as held, picked up, or None when it has ended."""
        path = self._shared(session_id)
        mark = _mark(path)
        if mark is None:  # ended (by whichever process), or never shared
            if session is not None:
                del self._sessions[session_id]
                await session.aclose(journal=False)
            return None
        if session is not None and self._seen.get(session_id) == mark:
            return session
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            _, turns = replay_journal(self.settings.sessions_dir / f"{session_id}.jsonl")
            if session is None:
                self._check_room()
                session = await GameSession.reopen(read_story(Path(record["story"])), self.settings, session_id,
                                                   record["snapshot"], turns)
                self._sessions[session_id] = session
            else:
                await session.resume(record["snapshot"], turns, journal=False)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise GameError(f"game session {session_id} could not be picked up from {path}: {e}") from e
        self._seen[session_id] = mark
        return session


def _mark(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size
