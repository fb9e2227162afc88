"""Embedding providers behind one interface: `local` (all-MiniLM-L6-v2 on ONNX Runtime on the CPU,
fetched or exported once, loaded once, batched), `ollama` and `openai`-compatible."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

import httpx

from frobozz._tls import tls_context

from ._batching import Batcher
from ._minilm import DIM, MODEL, load
from ._model_download import SHA256, URL
from .exceptions import MemoryStoreError
from .settings import MemorySettings

RECENT = 64  # texts whose vectors the local embedder keeps


class Embedder(Protocol):
    model: str
    dim: int

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


class LocalEmbedder:
    dim = DIM
    _lock = threading.Lock()  # one batch at a time on the CPU, across every embedder in the process

    def __init__(
        self,
        cache_dir: Path,
        url: str | None = URL,
        sha256: str = SHA256,
        *,
        batch_window: float = 0.004,
        batch_max: int = 64,
        threads: int = 0,
    ) -> None:
        self.model = MODEL
        self._cache_dir, self._url, self._sha256, self._threads = cache_dir, url, sha256, threads
        self._batcher = Batcher(self._encode, window=batch_window, max_texts=batch_max)  # concurrent requests, one run
        self._recent: OrderedDict[str, list[float]] = OrderedDict()  # the vectors of the last few texts embedded

    def _encode(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            try:
                model = load(self._cache_dir, self._url, self._sha256, self._threads)
            except OSError as e:
                raise MemoryStoreError(
                    f"the local embedding model could not be prepared in {self._cache_dir} ({e}): "
                    "set FROBOZZ_CACHE_DIR to a writable directory"
                ) from e
            vectors: list[list[float]] = model.encode(texts).tolist()
            return vectors

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """A text embedded a moment ago is not embedded again (a new window's orientation and the recall after it
        search with the same message; a session's warm-up embeds the same words each time)."""
        known = {t: self._recent[t] for t in texts if t in self._recent}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            known.update(zip(missing, await self._batcher.embed(missing), strict=True))
        for text in texts:
            self._recent[text] = known[text]
            self._recent.move_to_end(text)
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)
        return [list(known[t]) for t in texts]


class HttpEmbedder:
    """ollama (`/api/embed`) or an OpenAI-compatible `/v1/embeddings` endpoint."""

    def __init__(self, kind: str, url: str, model: str, dim: int, api_key: str | None) -> None:
        self.kind, self.url, self.model, self.dim, self.api_key = kind, url.rstrip("/"), model, dim, api_key
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10), verify=tls_context())

    async def embed(self, texts: list[str]) -> list[list[float]]:
        try:
            if self.kind == "ollama":
                response = await self._client.post(f"{self.url}/api/embed", json={"model": self.model, "input": texts})
                response.raise_for_status()
                vectors: list[list[float]] = response.json()["embeddings"]
            else:
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                response = await self._client.post(
                    f"{self.url}/v1/embeddings", headers=headers, json={"model": self.model, "input": texts}
                )
                response.raise_for_status()
                vectors = [item["embedding"] for item in sorted(response.json()["data"], key=lambda d: d["index"])]
        except (httpx.HTTPError, httpx.InvalidURL, KeyError, TypeError, ValueError) as e:
            raise MemoryStoreError(f"the {self.kind} embedding service at {self.url} failed: {e}") from e
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise MemoryStoreError(
                f"the {self.kind} embedding service returned vectors of the wrong size "
                f"(expected {len(texts)} of {self.dim})"
            )
        return vectors


def make_embedder(settings: MemorySettings) -> Embedder:
    """The embedder the settings name: the local ONNX model, or an HTTP provider (which needs its URL, model
    and dimension)."""
    if settings.embedding_provider == "local":
        return LocalEmbedder(
            settings.cache_dir,
            settings.embedding_onnx_url or None,
            settings.embedding_onnx_sha256,
            batch_window=settings.embedding_batch_ms / 1000,
            batch_max=settings.embedding_batch_max,
            threads=settings.embedding_threads,
        )
    if not (settings.embedding_url and settings.embedding_model and settings.embedding_dim):
        raise MemoryStoreError(
            f"the {settings.embedding_provider} provider needs FROBOZZ_EMBEDDING_URL, "
            "FROBOZZ_EMBEDDING_MODEL and FROBOZZ_EMBEDDING_DIM"
        )
    key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
    return HttpEmbedder(
        settings.embedding_provider, settings.embedding_url, settings.embedding_model, settings.embedding_dim, key
    )
