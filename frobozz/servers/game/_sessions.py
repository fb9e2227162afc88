"""The game sessions one server holds, each in its own interpreter process."""

from __future__ import annotations

import anyio

from frobozz.games import GameError, GameLibrary, GameSession, SessionState

from .settings import Settings


class SessionLimitError(GameError):
    pass


class Sessions:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.library = GameLibrary(settings)
        self._sessions: dict[str, GameSession] = {}
        self._opening = 0

    async def open(self, game: str) -> GameSession:
        story = self.library.find(game)  # refused here, before any process starts
        if len(self._sessions) + self._opening >= self.settings.max_sessions:
            raise SessionLimitError(f"{self.settings.max_sessions} games are already running: end one with "
                                    "end_game first")
        self._opening += 1
        try:
            session = await GameSession.open(story, self.settings)
        finally:
            self._opening -= 1
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> GameSession:
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.state is SessionState.CLOSED:
            running = ", ".join(self._sessions) or "none"
            raise GameError(f"no game session {str(session_id)[:80]!r} (running: {running}); "
                            "start one with new_game")
        return session

    async def end(self, session_id: str) -> GameSession:
        session = self.get(session_id)
        del self._sessions[session_id]
        await session.aclose()
        return session

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.aclose)
