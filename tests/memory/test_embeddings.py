"""The ollama and OpenAI-compatible embedding providers, against a real HTTP server on 127.0.0.1."""

import hashlib

import pytest
from mcp import Client
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from frobozz._loopback import LoopbackServer
from frobozz.servers.cortex import create_server

pytestmark = pytest.mark.anyio
DIM = 16


def vector(text: str, dim: int = DIM) -> list[float]:
    """A bag-of-words embedding: texts that share words point the same way."""
    v = [0.0] * dim
    for word in text.lower().split():
        v[int(hashlib.md5(word.strip(".,?!").encode()).hexdigest(), 16) % dim] += 1.0
    norm = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / norm for x in v]


class EmbeddingService:
    def __init__(self, dim: int = DIM, status: int = 200):
        self.dim, self.status, self.calls = dim, status, 0

    async def ollama(self, request: Request):
        self.calls += 1
        body = await request.json()
        if self.status != 200:
            return JSONResponse({"error": "model not loaded"}, status_code=self.status)
        return JSONResponse({"model": body["model"], "embeddings": [vector(t, self.dim) for t in body["input"]]})

    async def openai(self, request: Request):
        self.calls += 1
        body = await request.json()
        if request.headers.get("authorization") != "Bearer sk-embed":
            return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
        data = [
            {"object": "embedding", "index": i, "embedding": vector(t, self.dim)} for i, t in enumerate(body["input"])
        ]
        return JSONResponse({"data": list(reversed(data)), "model": body["model"]})  # order by index, not position

    def app(self):
        return Starlette(
            routes=[
                Route("/api/embed", self.ollama, methods=["POST"]),
                Route("/v1/embeddings", self.openai, methods=["POST"]),
            ]
        )


async def _store_and_search(settings):
    async with Client(create_server(settings)) as client:
        for text in ("the brass lantern is in the living room", "the troll guards the bridge"):
            assert not (await client.call_tool("store", {"content": text})).is_error
        return await client.call_tool("search", {"query": "where is the lantern", "mode": "semantic"})


@pytest.mark.parametrize("provider", ["ollama", "openai"])
async def test_a_remote_embedding_service_embeds_memories_and_queries(cortex_settings, provider):
    service = EmbeddingService()
    server = LoopbackServer(service.app())
    server.start()
    try:
        settings = cortex_settings.model_copy(
            update={
                "embedding_provider": provider,
                "embedding_url": server.url,
                "embedding_model": "fake-embed",
                "embedding_dim": DIM,
                "embedding_api_key": SecretStr("sk-embed"),
            }
        )
        result = await _store_and_search(settings)
    finally:
        server.stop()
    assert not result.is_error, result.content[0].text
    assert result.structured_content["results"][0]["content"] == "the brass lantern is in the living room"
    assert service.calls == 3


async def test_a_failing_or_wrong_sized_embedding_service_is_a_clear_error(cortex_settings):
    for service, message in ((EmbeddingService(status=500), "HTTP"), (EmbeddingService(dim=7), "wrong size")):
        server = LoopbackServer(service.app())
        server.start()
        try:
            settings = cortex_settings.model_copy(
                update={
                    "embedding_provider": "ollama",
                    "embedding_url": server.url,
                    "embedding_model": "m",
                    "embedding_dim": DIM,
                }
            )
            async with Client(create_server(settings)) as client:
                result = await client.call_tool("store", {"content": "anything at all"})
                assert result.is_error and message in result.content[0].text
                assert (await client.call_tool("recent", {})).structured_content["memories"] == []
        finally:
            server.stop()


def test_a_remote_provider_without_its_settings_is_refused_with_what_to_set(cortex_settings):
    with pytest.raises(Exception, match="needs FROBOZZ_EMBEDDING_URL"):
        create_server(cortex_settings.model_copy(update={"embedding_provider": "openai"}))


async def test_switching_models_is_an_error_until_reembed_moves_every_memory(cortex_settings):
    from frobozz.memory import BulkStore, MemoryService

    async with Client(create_server(cortex_settings)) as client:  # the local model, 384 dims
        for text in ("the brass lantern is in the living room", "the troll guards the bridge"):
            await client.call_tool("store", {"content": text})
    service = EmbeddingService()
    server = LoopbackServer(service.app())
    server.start()
    try:
        switched = cortex_settings.model_copy(
            update={
                "embedding_provider": "ollama",
                "embedding_url": server.url,
                "embedding_model": "fake-embed",
                "embedding_dim": DIM,
            }
        )
        async with Client(create_server(switched)) as client:
            refused = await client.call_tool("search", {"query": "lantern"})
        assert refused.is_error and "frobozz cortex reembed" in refused.content[0].text
        opened = MemoryService(switched)
        try:
            assert await BulkStore(await opened.store(check_model=False)).reembed(batch=1) == 2
        finally:
            await opened.aclose()
        async with Client(create_server(switched)) as client:
            found = await client.call_tool("search", {"query": "where is the lantern", "mode": "semantic"})
    finally:
        server.stop()
    assert found.structured_content["results"][0]["content"] == "the brass lantern is in the living room"
