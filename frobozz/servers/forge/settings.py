"""Settings of the forge server (FROBOZZ_FORGE_*), and where its images are kept."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: platformdirs.user_data_path("frobozz", appauthor=False))
    forge_backend: Literal["sdwebui", "comfyui", "openai"] = "sdwebui"
    forge_url: str = Field(default="http://127.0.0.1:7860", description="The backend's base URL.")
    forge_api_key: SecretStr | None = Field(default=None, description="Bearer token, where the backend needs one.")
    forge_model: str | None = Field(default=None, description="The backend's model, unless a call names one.")
    forge_timeout: float = Field(default=600.0, gt=0, description="Seconds one image may take.")
    forge_poll_interval: float = Field(default=0.5, gt=0, description="Seconds between progress polls.")
    forge_preview_px: int = Field(default=512, ge=64, le=2048, description="Longest side of the preview sent back.")
    forge_max_prompt_chars: int = Field(default=4000, ge=1)

    @property
    def images_dir(self) -> Path:
        return self.data_dir / "images"
