"""Settings of the game server: the games part's settings plus the server's own limits."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from frobozz.games import GamesSettings

if TYPE_CHECKING:
    from frobozz.memory import MemorySettings


class Settings(GamesSettings):
    max_sessions: int = Field(
        default=16, ge=1, le=256, description="Game sessions one server keeps at once (each is a process)."
    )
    autosave_slot: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
        description="Save every game to this slot after each act (for runners).",
    )
    game_shared_sessions: bool = Field(
        default=False,
        description="Keep each session's state in the data directory, so any of several server "
        "processes (behind a load balancer) can answer for it. `serve all --http` sets it.",
    )
    game_recall_namespace: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$",
        description="With game_recall_session: after each act, recall long-term memories of this namespace "
        "(`play --memory` in tools mode).",
    )
    game_recall_session: str | None = Field(
        default=None,
        max_length=100,
        description="The memory-loop session whose seen-set recall keeps (no memory comes back twice in a run).",
    )
    game_mailbox: Path | None = Field(
        default=None, description="A folder where the runner leaves notes for the next game answer, and pauses play."
    )

    @property
    def recalls(self) -> bool:
        """Whether the server recalls memories after each act (both of game_recall_namespace and _session set)."""
        return bool(self.game_recall_namespace and self.game_recall_session)

    def memory_settings(self) -> MemorySettings | None:
        """The settings of the MemoryService recall works on (the database and embedding model of FROBOZZ_*, in
        this data folder), None when the server does not recall: it then opens none, nor takes one to share."""
        if not self.recalls:
            return None
        from frobozz.memory import MemorySettings  # (numpy, asyncpg, the embedder: only for a server that recalls)

        return MemorySettings(data_dir=self.data_dir)
