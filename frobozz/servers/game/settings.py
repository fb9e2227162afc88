"""Settings of the game server: the games part's settings plus the server's own limits."""

from __future__ import annotations

from pydantic import Field

from frobozz.games import GamesSettings


class Settings(GamesSettings):
    max_sessions: int = Field(default=16, ge=1, le=256,
                              description="Game sessions one server keeps at once (each is a process).")
    autosave_slot: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
                                      description="Save every game to this slot after each act (for runners).")
    game_shared_sessions: bool = Field(
        default=False, description="Keep each session's state in the data directory, so any of several server "
                                   "processes (behind a load balancer) can answer for it. `serve all --http` sets it.")
