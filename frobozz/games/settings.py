"""Settings of the games part, read from FROBOZZ_* environment variables (and an optional .env)."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return platformdirs.user_data_path("frobozz", appauthor=False)


class GamesSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    data_dir: Path = Field(
        default_factory=default_data_dir, description="Where installed games, saves, runs and the database live."
    )
    games_dir: Path | None = Field(default=None, description="A folder of story files, searched first.")
    step_timeout: float = Field(default=10.0, gt=0, description="Seconds one interpreter call may take.")

    @property
    def installed_games_dir(self) -> Path:
        return self.data_dir / "games"

    @property
    def saves_dir(self) -> Path:
        return self.data_dir / "saves"

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"
