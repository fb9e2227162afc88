"""cortex against a real Postgres with pgvector (pgserver), through the MCP client."""

import os
import sys
from functools import partial

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from frobozz.servers.cortex import Settings, create_server
from tests.conftest import database_url
from tests.database import database_name
from tests.servers.cortex import MEMORIES
from tests.servers.mcp import assert_conventions, call, error
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def _seed(client, namespace=None):
    ids = []
    for text in MEMORIES:
        ids.append((await call(client, "store", content=text, **({"namespace": namespace} if namespace else {})))["id"])
    return ids


async def test_store_returns_after_commit_and_the_same_text_is_not_stored_twice(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        first = await call(client, "store", content="The lamp is in the living room.", metadata={"room": "living"})
        again = await call(client, "store", content="The lamp   is in the living room.")
        elsewhere = await call(client, "store", content="The lamp is in the living room.", namespace="agent-b")
        memory = await call(client, "get", id=first["id"])
    assert first["duplicate_of"] is None and again["duplicate_of"] == first["id"] == again["id"]
    assert elsewhere["duplicate_of"] is None and elsewhere["id"] != first["id"]
    assert memory["metadata"] == {"room": "living"} and memory["namespace"] == "default"


async def test_the_right_memory_wins_for_paraphrases_rare_tokens_and_both(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        ids = await _seed(client)
        by_meaning = await call(client, "search", query="what is the name of my pet?", mode="semantic")
        by_token = await call(client, "search", query="XQ-7731", mode="keyword")
        hybrid = await call(client, "search", query="which hot drink do I like in the morning", explain=True)
        phrase = await call(client, "search", query="quarterly planning meeting", explain=True)
    assert by_meaning["results"][0]["id"] == ids[0]
    assert by_token["results"][0]["id"] == ids[2] and len(by_token["results"]) == 1
    assert hybrid["results"][0]["id"] == ids[3]
    top = phrase["results"][0]
    assert top["id"] == ids[4] and top["parts"]["words"] > 0.5


async def test_a_question_sharing_only_some_words_with_its_answer_is_found_by_keyword(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        ids = await _seed(client)
        found = await call(client, "search", query="when was the Grue invoice settled?", mode="keyword")
        punctuation = await call(client, "search", query="?! -- \"' OR AND NOT", mode="keyword")
    assert found["results"][0]["id"] == ids[2]
    assert punctuation["results"] == []


async def test_recent_update_and_forget(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        ids = await _seed(client)
        recent = await call(client, "recent", limit=3)
        assert [m["id"] for m in recent["memories"]] == ids[::-1][:3]
        updated = await call(client, "update", id=ids[3], content="The user now prefers coffee, black.")
        assert updated["content"] == "The user now prefers coffee, black." and updated["supersedes"] == ids[3]
        found = await call(client, "search", query="black coffee", mode="keyword")
        assert found["results"][0]["id"] == updated["id"]
        assert (await call(client, "forget", id=ids[0]))["forgotten"]
        assert "no memory" in await error(client, "get", id=ids[0])
        assert "already be forgotten" in await error(client, "forget", id=ids[0])
        left = await call(client, "search", query="dog called Biscuit", mode="semantic", limit=50)
        assert ids[0] not in [r["id"] for r in left["results"]]
        assert "no memory 999999" in await error(client, "update", id=999999, content="x")


@pytest.mark.parametrize(
    "text",
    [
        "It's \"quoted\" and 'single' and a \\backslash\\",
        "100% of the_underscores and %wildcards% in LIKE",
        "Unicode: Zürich, 東京, Ελλάδα, emoji 🐉🔦",
        "'); DROP TABLE memories; --",
        "x" * 10_000,
    ],
)
async def test_hostile_text_is_stored_and_found_exactly(cortex_settings, text):
    async with Client(create_server(cortex_settings)) as client:
        stored = await call(client, "store", content=text)
        assert (await call(client, "get", id=stored["id"]))["content"] == text
        for mode in ("keyword", "semantic", "hybrid"):
            await call(client, "search", query=text[:5000], mode=mode)
        assert (await call(client, "recent", limit=1))["memories"][0]["id"] == stored["id"]


async def test_bad_input_gets_a_clear_error_and_changes_nothing(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        assert "empty" in await error(client, "store", content="   ")
        assert "NUL" in await error(client, "store", content="a\0b")
        assert "at most 10,000 are kept" in await error(client, "store", content="y" * 10_001)
        assert "invalid namespace" in await error(client, "store", content="ok", namespace="../x")
        assert "lone surrogate" in await error(client, "store", content="an unpaired \ud800 escape")
        assert "lone surrogate" in await error(client, "store", content="ok", metadata={"a": "\udc80"})
        assert (await call(client, "search", query="\udc80"))["results"] == []  # (searched as U+FFFD: nothing)
        assert "query is empty" in await error(client, "search", query="")
        assert (await client.call_tool("search", {"query": "x", "limit": 0})).is_error
        assert (await client.call_tool("search", {"query": "x", "mode": "psychic"})).is_error
        assert (await client.call_tool("get", {"id": -1})).is_error
        assert (await call(client, "recent"))["memories"] == []


async def test_namespaces_never_leak_into_each_other(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        await call(client, "store", content="Agent A's secret plan involves the trap door.", namespace="a")
        await call(client, "store", content="Agent B likes sandwiches.", namespace="b")
        for mode in ("keyword", "semantic", "hybrid"):
            hits = await call(client, "search", query="secret plan trap door", namespace="b", mode=mode)
            assert all("Agent A" not in r["content"] for r in hits["results"])
        assert [m["content"] for m in (await call(client, "recent", namespace="b"))["memories"]] == [
            "Agent B likes sandwiches."
        ]
        assert (await call(client, "recent"))["memories"] == []


async def test_concurrent_stores_from_several_clients_lose_nothing(cortex_settings):
    async with Client(create_server(cortex_settings)) as one, Client(create_server(cortex_settings)) as two:
        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(
                    partial(call, one if i % 2 else two, "store", content=f"memory number {i} of the stress test")
                )
        recent = await call(one, "recent", limit=100)
    assert sorted(m["content"] for m in recent["memories"]) == sorted(
        f"memory number {i} of the stress test" for i in range(40)
    )


async def test_a_database_that_goes_away_gives_a_clear_error_and_service_resumes(frobozz_env, tmp_path):
    import pgserver

    server = pgserver.get_server(tmp_path / "pg-flaky", cleanup_mode="stop")
    settings = Settings(database_url=server.get_uri())
    async with Client(create_server(settings)) as client:
        kept = await call(client, "store", content="Written before the outage.")
        server.cleanup()  # the database stops
        assert "not reachable" in await error(client, "store", content="Written during the outage.")
        server = pgserver.get_server(tmp_path / "pg-flaky", cleanup_mode="stop")  # and comes back
        with anyio.fail_after(30):

            async def ready() -> object:
                return not (await client.call_tool("recent", {})).is_error

            await eventually(ready, interval=0.2)
        memories = (await call(client, "recent"))["memories"]
        assert [m["id"] for m in memories] == [kept["id"]]  # nothing written was lost, nothing half-written
        assert (await call(client, "store", content="Written after the outage."))["duplicate_of"] is None
    server.cleanup()


async def test_a_database_embedded_with_another_model_is_a_clear_error(cortex_settings, postgres):
    async with Client(create_server(cortex_settings)) as client:
        await call(client, "store", content="anything")
    name = database_url(postgres, "x").rsplit("/", 1)[0]
    db = database_name(cortex_settings)
    postgres.psql(f"\\c {db}\nUPDATE cortex_meta SET value = 'some-other-model' WHERE key = 'embedding_model';")
    async with Client(create_server(cortex_settings)) as client:
        message = await error(client, "search", query="anything")
    assert "embedded with some-other-model" in message and name


async def test_the_server_over_real_stdio_with_the_embedded_default(frobozz_env):
    env = {"FROBOZZ_DATA_DIR": os.environ["FROBOZZ_DATA_DIR"]}  # no FROBOZZ_DATABASE_URL: pgserver in the data dir
    params = StdioServerParameters(command=sys.executable, args=["-m", "frobozz", "serve", "cortex"], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"store", "search", "recent", "get", "update", "supersede", "forget"}
        assert_conventions(tools.values())
        stored = await call(client, "store", content="Stored over stdio in the embedded database.")
        found = await call(client, "search", query="embedded database stdio")
    assert found["results"][0]["id"] == stored["id"]
    assert (frobozz_env / "postgres").is_dir()


async def test_every_pooled_connection_searches_with_the_wider_hnsw_candidate_list(cortex_settings):
    from frobozz.memory import MemoryService

    cortex = MemoryService(cortex_settings)
    pool = (await cortex.store()).pool
    try:
        for _ in range(3):  # a released connection is reset: the setting must survive that
            async with pool.acquire() as c:
                assert await c.fetchval("SHOW hnsw.ef_search") == "200"
    finally:
        await cortex.aclose()


def test_reembed_and_the_bench_build_the_hnsw_index_as_the_latest_migration_does():
    from frobozz.memory._database import HNSW_INDEX, INDEX_MEMORY, _migrations

    latest = [sql for _, _, sql in _migrations("frobozz.memory") if "INDEX memories_embedding" in sql][-1]
    assert HNSW_INDEX in latest and INDEX_MEMORY in latest  # the same graph, built in the same memory


async def test_what_a_loop_session_stores_is_seen_in_it_and_a_bad_session_does_not_lose_the_memory(
    cortex_settings, memory_service
):
    sessions = await memory_service.sessions()
    run = await sessions.open("default", client="test")
    seen_by_run = cortex_settings.model_copy(update={"cortex_seen_session": run.id})
    async with Client(create_server(seen_by_run)) as client:
        kept = await call(client, "store", content="In the Kitchen, the sack holds garlic.")
    assert await sessions.unseen(run.id, [kept["id"]]) == []  # recall will not hand it back to its writer
    broken = cortex_settings.model_copy(update={"cortex_seen_session": "not-a-session"})
    async with Client(create_server(broken)) as client:
        other = await call(client, "store", content="The troll is killed with the sword.")
        assert (await call(client, "get", id=other["id"]))["content"] == "The troll is killed with the sword."
