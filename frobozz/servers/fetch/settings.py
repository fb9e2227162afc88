"""Settings of the fetch server (FROBOZZ_FETCH_*): safety, limits, cache, and the services' addresses."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from frobozz._env_lists import env_list


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: platformdirs.user_data_path("frobozz", appauthor=False))
    fetch_allow_private: bool = Field(default=False, description="Allow private, loopback and link-local addresses.")
    fetch_allowlist: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Hosts or networks allowed even if private (separated by commas, or a JSON list).",
    )
    fetch_user_agent: str = "Frobozz-Fetch/0.1 (MCP fetch tool; model-initiated)"
    fetch_respect_robots: bool = True
    fetch_max_redirects: int = Field(default=5, ge=0, le=20)
    fetch_connect_timeout: float = Field(default=10.0, gt=0)
    fetch_read_timeout: float = Field(default=20.0, gt=0)
    fetch_total_timeout: float = Field(default=60.0, gt=0, description="Seconds a whole fetch may take.")
    fetch_max_bytes: int = Field(default=5 * 1024 * 1024, ge=1024, description="Body bytes read at most.")
    fetch_image_px: int = Field(default=1024, ge=64, le=4096, description="Longest side of an image sent back.")
    fetch_cache: bool = True
    fetch_cache_ttl: float = Field(default=300.0, ge=0)
    fetch_youtube_url: str = "https://www.youtube.com"
    fetch_github_url: str = "https://github.com"
    fetch_github_raw_url: str = "https://raw.githubusercontent.com"

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "fetch-cache"

    @field_validator("fetch_allowlist", mode="before")
    @classmethod
    def _entries(cls, value: object) -> object:
        value = env_list(value, ",")  # `127.0.0.1, 10.0.0.0/8` as a user writes it
        for entry in value if isinstance(value, list) else ():
            if isinstance(entry, str) and "/" in entry:  # a network (`10.0.0.0/33` was taken for a host name)
                try:
                    ipaddress.ip_network(entry.strip(), strict=False)
                except ValueError as e:
                    raise ValueError(f"{entry!r} is not a network: {e}") from None
        return value
