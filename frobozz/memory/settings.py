"""Settings of the memory store: the database, and the embedding provider (FROBOZZ_* variables)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from frobozz._env_lists import env_list

from . import _model_download


class MemorySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FROBOZZ_", env_ignore_empty=True, env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: platformdirs.user_data_path("frobozz", appauthor=False))
    cache_dir: Path = Field(
        default_factory=lambda: platformdirs.user_cache_path("frobozz", appauthor=False),
        description="Rebuildable files: the local embedding model's ONNX export.",
    )
    database_url: SecretStr | None = Field(default=None, description="Any Postgres with pgvector; unset: embedded.")
    embedding_provider: Literal["local", "ollama", "openai"] = "local"
    embedding_model: str | None = Field(default=None, description="The provider's model (local: all-MiniLM-L6-v2).")
    embedding_url: str | None = Field(default=None, description="The ollama or OpenAI-compatible base URL.")
    embedding_api_key: SecretStr | None = None
    embedding_dim: int | None = Field(default=None, ge=1, le=16000, description="For remote models: their size.")
    embedding_onnx_url: str = Field(
        default=_model_download.URL,
        description=(
            "local: where the pre-exported ONNX model is fetched from once (a tar.gz holding model.onnx and "
            "tokenizer.json); empty: never fetch, export it here (needs the `export` extra)."
        ),
    )
    embedding_onnx_sha256: str = Field(
        default=_model_download.SHA256,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="The SHA-256 the fetched archive must have.",
    )
    embedding_batch_ms: float = Field(
        default=4.0,
        ge=0.0,
        le=100.0,
        description=(
            "local: how long the first of concurrent requests waits for others to embed with it in one batch "
            "(0: each embeds alone)."
        ),
    )
    embedding_batch_max: int = Field(default=64, ge=1, le=1024, description="local: at most this many texts a batch.")
    embedding_threads: int = Field(
        default=0,
        ge=0,
        le=256,
        description=(
            "local: the model's threads for one batch (0: one per core). 1 costs less CPU a text when many clients "
            "keep every core busy, but served fewer operations a second in bench/cortex_load.py, even when quiet."
        ),
    )
    cortex_default_namespace: str = "default"
    cortex_max_content_chars: int = Field(
        default=10_000,
        ge=1,
        description=(
            "The longest memory stored, in characters (as long as the longest query): a longer text is refused, "
            "nothing stored; the embedding model reads only its first few hundred words anyway."
        ),
    )
    cortex_pool_size: int = Field(default=5, ge=1, le=100)
    cortex_seen_session: str | None = Field(
        default=None,
        max_length=100,
        description=(
            "A memory-loop session (`play --memory` sets it): what the cortex server stores is marked seen in it, "
            "so recall does not hand the writer back its own note."
        ),
    )
    cortex_cosine_floor: float = Field(
        default=0.2,
        ge=0.0,
        lt=1.0,
        description=(
            "The cosine the embedding model gives unrelated text (0.2 for all-MiniLM-L6-v2): scores count only "
            "the closeness above it. Set it for another model."
        ),
    )

    # -- images kept with memories (cortex's store with an image) ---------------------------------------
    cortex_image_folders: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description=(
            "Folders whose images cortex may read by path (separated by ':' or a JSON list); none: base64 only."
        ),
    )
    cortex_images_dir: Path | None = Field(default=None, description="Where images are kept (DATA_DIR/images).")
    cortex_image_max_bytes: int = Field(default=20_000_000, ge=1, description="The largest image file kept.")
    cortex_image_max_pixels: int = Field(
        default=40_000_000,
        ge=1,
        description=(
            "The most pixels an image may decode to (a few kB of PNG can claim billions: a decompression bomb)."
        ),
    )
    cortex_vision_model: str | None = Field(
        default=None,
        description=(
            "A Messages API model that sees images (e.g. claude-haiku-4-5): it describes each stored image so words "
            "find it. Unset: the memory's own text alone."
        ),
    )
    cortex_vision_url: str = Field(default="https://api.anthropic.com", description="The Messages API's base URL.")
    cortex_vision_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("FROBOZZ_CORTEX_VISION_API_KEY", "ANTHROPIC_API_KEY", "cortex_vision_api_key"),
    )
    cortex_vision_timeout: float = Field(default=60.0, gt=0, description="Seconds a description may take.")

    @field_validator("cortex_image_folders", mode="before")
    @classmethod
    def _folders(cls, value: object) -> object:
        return env_list(value, os.pathsep)

    @property
    def images_dir(self) -> Path:
        return self.cortex_images_dir or self.data_dir / "images"

    @property
    def postgres_dir(self) -> Path:
        return self.data_dir / "postgres"
