"""Concurrent embeddings run as one batch of the real model, and each caller gets its own vectors."""

import anyio
import numpy as np
import pytest

from frobozz.memory._batching import Batcher
from frobozz.memory._embeddings import LocalEmbedder

pytestmark = pytest.mark.anyio
TEXTS = [f"Note {i}: " + "the brass lantern is in the living room " * (i % 5 + 1) for i in range(40)]


@pytest.fixture(scope="module")
def local(cache_dir):
    return LocalEmbedder(cache_dir)


async def test_concurrent_requests_share_model_runs_and_get_the_vectors_they_would_get_alone(local):
    alone = np.array(local._encode(TEXTS))
    runs = []

    def encode(texts):
        runs.append(len(texts))
        return local._encode(texts)

    batcher = Batcher(encode, window=0.05, max_texts=16)
    got = {}

    async def one(i):
        got[i] = await batcher.embed([TEXTS[i]])

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for i in range(len(TEXTS)):
                tg.start_soon(one, i)
    assert await batcher.embed([]) == []
    assert sum(runs) == len(TEXTS) and len(runs) < len(TEXTS) / 4  # a few batches, none over the cap's reach
    for i, text in enumerate(TEXTS):
        assert np.abs(np.array(got[i][0]) - alone[i]).max() < 1e-5, text


async def test_a_failing_batch_fails_each_caller_and_the_next_batch_runs():
    calls = []

    def encode(texts):
        calls.append(list(texts))
        if len(calls) == 1:
            raise RuntimeError("the model file is damaged")
        return [[float(len(t))] for t in texts]

    batcher = Batcher(encode, window=0.05)
    errors = []

    async def one(text):
        try:
            await batcher.embed([text])
        except RuntimeError as e:
            errors.append(str(e))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for text in ("a", "bb", "ccc"):
                tg.start_soon(one, text)
        assert errors == ["the model file is damaged"] * 3
        assert await batcher.embed(["dddd", "ee"]) == [[4.0], [2.0]]


async def test_a_leader_that_is_cancelled_still_runs_the_batch_for_the_others():
    batcher = Batcher(lambda texts: [[float(len(t))] for t in texts], window=0.2)
    got = []

    async def follower():
        got.append(await batcher.embed(["follower"]))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as leader:
                tg.start_soon(follower)  # starts after the leader below has queued its text
                leader.cancel()
                await batcher.embed(["leader"])
    assert got == [[[8.0]]]


async def test_a_text_embedded_a_moment_ago_is_not_embedded_again_and_gets_the_same_vector(cache_dir, monkeypatch):
    """A new window's orientation and the recall after it search with the same message: one model run."""
    monkeypatch.setattr("frobozz.memory._embeddings.RECENT", 8)
    local = LocalEmbedder(cache_dir)
    runs = []
    encode = local._encode
    local._batcher.encode = lambda texts: runs.append(list(texts)) or encode(texts)
    with anyio.fail_after(120):
        first = await local.embed([TEXTS[0], TEXTS[1]])
        again = await local.embed([TEXTS[1], TEXTS[2], TEXTS[1]])
        for text in TEXTS[3:12]:  # more than it keeps: the oldest is embedded anew
            await local.embed([text])
        assert len(await local.embed([TEXTS[0]])) == 1
    assert runs[:2] == [[TEXTS[0], TEXTS[1]], [TEXTS[2]]] and runs[-1] == [TEXTS[0]]
    assert again[0] == again[2] == first[1] and again[0] is not first[1]  # a copy each: a caller's edit stays its own
