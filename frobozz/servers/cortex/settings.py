"""Settings of the cortex server: the memory store's (database, embeddings, namespaces)."""

from __future__ import annotations

from ...memory import MemorySettings


class Settings(MemorySettings):
    """FROBOZZ_DATABASE_URL, FROBOZZ_EMBEDDING_*, FROBOZZ_CORTEX_*: see `MemorySettings`."""
