"""Settings of the memory store: the database, and the embedding provider (FROBOZZ_* variables)."""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Literal

import httpx
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

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_database_url(value.get_secret_value())
        return value

    @field_validator("embedding_url", "embedding_onnx_url", "cortex_vision_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value:  # (the ONNX URL empty: never fetched)
            try:
                httpx.URL(value)
            except httpx.InvalidURL as e:
                raise ValueError(f"not a URL: {e}") from None
        return value

    @field_validator("cortex_default_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        from ._store import check_namespace  # (the store imports these settings)
        from .exceptions import MemoryStoreError

        try:
            return check_namespace(value)
        except MemoryStoreError as e:
            raise ValueError("not a namespace: " + str(e).partition(": ")[2]) from None

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


def check_database_url(url: str) -> None:
    """ValueError, saying what is wrong, when `url` is not a Postgres URL asyncpg can read (a port that is no number,
    an IPv6 host without its `]`): asyncpg's own ValueError came only when it connected, as a traceback. The
    message never repeats the URL (it may hold a password)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:
        raise ValueError(f"not a URL: {e}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError("not a postgresql:// URL")
    hosts = parts.netloc.partition("@")[2] if "@" in parts.netloc else parts.netloc  # (as asyncpg splits it)
    for host in filter(None, hosts.split(",")):
        if host.startswith("["):  # an IPv6 address, as asyncpg reads it
            address = re.match(r"\[[^\]]+\](?::([0-9]+))?", host)
            if address is None:
                raise ValueError(f"invalid IPv6 host {host[:60]!r}")
            continue
        port = urllib.parse.unquote(host.partition(":")[2]) if not host.startswith("/") else ""
        if port and not port.isdigit():
            raise ValueError(f"the port {port[:20]!r} is not a number")
