"""The local embedding model on ONNX Runtime gives sentence-transformers' vectors for the same weights."""

from pathlib import Path

import numpy as np
import pytest
from mcp import Client

from frobozz.memory import _minilm
from frobozz.servers.cortex import create_server
from tests.servers.mcp import call, error

TEXTS = ["", "a", "The doctor recommended the dentist appointment on Monday.",
         "Café 🎉 東京 naïve Zürich " * 200,  # far past 256 tokens: truncated as sentence-transformers does
         "'; DROP TABLE memories; -- \\ % _ \x01", "short"] + [
    f"note {n} about piano lessons" * (n % 7) for n in range(70)]


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(_minilm.weights_dir()), device="cpu")


def test_the_onnx_model_embeds_like_sentence_transformers_across_batches_and_lengths(cache_dir: Path, reference):
    vectors = _minilm.load(cache_dir).encode(TEXTS)  # 76 texts: two batches, sorted by length, given back in order
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    assert vectors.shape == (len(TEXTS), _minilm.DIM)
    assert np.abs(vectors - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_an_empty_list_embeds_to_nothing(cache_dir: Path):
    assert _minilm.load(cache_dir).encode([]).shape == (0, _minilm.DIM)


def test_a_damaged_cached_export_is_made_again(tmp_path: Path, cache_dir: Path):
    damaged = _minilm.onnx_path(tmp_path)
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"not an onnx file")
    model = _minilm.load(tmp_path)
    assert damaged.stat().st_size > 10_000_000 and not list(damaged.parent.glob("*.part"))
    good = _minilm.load(cache_dir)
    assert np.allclose(model.encode(["the same weights"]), good.encode(["the same weights"]), atol=1e-6)


@pytest.mark.anyio
async def test_a_cache_directory_that_cannot_be_written_is_a_clear_error_and_stores_nothing(cortex_settings, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    async with Client(create_server(cortex_settings.model_copy(update={"cache_dir": blocked}))) as client:
        message = await error(client, "store", content="Remember the brass lantern.")
        assert "FROBOZZ_CACHE_DIR" in message and "a-file" in message
    async with Client(create_server(cortex_settings)) as client:
        assert (await call(client, "recent"))["memories"] == []
