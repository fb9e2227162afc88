"""Facts that change: supersede keeps the old memory as history, search finds current ones unless asked,
get shows the chain, export/import keep it, and the migration keeps what was there current."""

import json

import anyio
import pytest
from mcp import Client

from frobozz.memory import BulkStore, MemoryService
from frobozz.memory._database import connect
from frobozz.servers.cortex import create_server
from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio


async def test_supersede_keeps_the_old_fact_as_history_and_search_finds_the_current_one(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        assert (await call(client, "search", query="where does Ana live", include_history=True))["results"] == []
        old = await call(client, "store", content="Ana lives in Porto.", metadata={"who": "ana"})
        new = await call(client, "supersede", old_id=old["id"], content="Ana moved to Lisbon in May.")
        newest = await call(client, "supersede", old_id=new["id"], content="Ana lives in Berlin now.")
        current = await call(client, "search", query="Ana lives Porto Lisbon Berlin")
        everything = await call(client, "search", query="Ana lives Porto Lisbon Berlin", include_history=True)
        first = await call(client, "get", id=old["id"])
        last = await call(client, "get", id=newest["id"])
        recent = await call(client, "recent")
    assert [r["id"] for r in current["results"]] == [newest["id"]]
    assert {r["id"] for r in everything["results"]} == {old["id"], new["id"], newest["id"]}
    assert {r["id"]: r["superseded_by"] for r in everything["results"]}[old["id"]] == new["id"]
    assert new["supersedes"] == old["id"] and new["metadata"] == {"who": "ana"} and new["namespace"] == "default"
    assert first["valid_to"] is not None and first["superseded_by"] == new["id"]
    assert (
        [h["id"] for h in first["history"]]
        == [h["id"] for h in last["history"]]
        == [old["id"], new["id"], newest["id"]]
    )
    assert last["valid_to"] is None and last["history"][-1]["valid_to"] is None
    assert [m["id"] for m in recent["memories"]] == [newest["id"]]


async def test_a_superseded_or_missing_memory_cannot_be_superseded_and_nothing_changes(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        old = await call(client, "store", content="The meeting is on Monday.")
        other = await call(client, "store", content="The meeting room is B12.")
        assert "already says exactly that" in await error(
            client, "supersede", old_id=old["id"], content="The meeting is   on Monday."
        )
        assert "empty" in await error(client, "supersede", old_id=old["id"], content="  ")
        assert "no memory 999999" in await error(client, "supersede", old_id=999999, content="x")
        assert "already has that exact text" in await error(
            client, "supersede", old_id=old["id"], content="The meeting room is B12."
        )
        assert (await call(client, "get", id=old["id"]))["valid_to"] is None  # the failed one left it current
        new = await call(client, "supersede", old_id=old["id"], content="The meeting is on Tuesday.")
        assert f"superseded by memory {new['id']}" in await error(
            client, "supersede", old_id=old["id"], content="Wednesday"
        )
        again = await call(client, "store", content="The meeting is on Monday.")  # the old text, current again
        assert again["duplicate_of"] is None and again["id"] not in (old["id"], new["id"], other["id"])


async def test_update_with_a_new_text_supersedes_and_keeps_the_old_version(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        old = await call(client, "store", content="Sam works at Acme.", metadata={"who": "sam"})
        tagged = await call(client, "update", id=old["id"], metadata={"who": "sam", "checked": True})
        new = await call(client, "update", id=old["id"], content="Sam works at Globex now.")
        retried = await call(client, "update", id=old["id"], content="Sam works at Globex now.")
        refused = await error(client, "update", id=old["id"], content="Sam works at Initech.")
        first = await call(client, "get", id=old["id"])
        current = await call(client, "search", query="where does Sam work")
        everything = await call(client, "search", query="where does Sam work", include_history=True)
        missing = await error(client, "update", id=999999, content="x")
    assert tagged["id"] == old["id"] and tagged["content"] == "Sam works at Acme." and tagged["valid_to"] is None
    assert new["id"] != old["id"] and new["supersedes"] == old["id"] and new["metadata"]["checked"] is True
    assert retried == new  # asked again, it returns the version it made: nothing more is stored
    assert f"superseded by memory {new['id']}" in refused
    assert first["content"] == "Sam works at Acme." and first["superseded_by"] == new["id"] and first["valid_to"]
    assert [h["content"] for h in first["history"]] == ["Sam works at Acme.", "Sam works at Globex now."]
    assert [r["id"] for r in current["results"]] == [new["id"]]
    assert {r["id"] for r in everything["results"]} == {old["id"], new["id"]}
    assert "no memory 999999" in missing


async def test_two_clients_superseding_one_memory_at_once_make_one_chain(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        old = await call(client, "store", content="The build runs on Jenkins.")
        results = []

        async def supersede(text):
            results.append(await client.call_tool("supersede", {"old_id": old["id"], "content": text}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for text in ("The build runs on GitHub Actions.", "The build runs on Buildkite."):
                    tg.start_soon(supersede, text)
        history = (await call(client, "get", id=old["id"]))["history"]
    assert sorted(r.is_error for r in results) == [False, True] and len(history) == 2


async def test_export_and_import_keep_the_chains(cortex_settings, tmp_path):
    service = MemoryService(cortex_settings)
    try:
        store = await service.store()
        a = (await store.store("The office is in Leeds.", namespace="firm"))[0]
        b = await store.supersede(a.id, "The office moved to York.")
        c = await store.supersede(b.id, "The office moved to Hull.")
        await store.store("Unrelated: the cat is grey.", namespace="firm")
        exported = [r async for r in BulkStore(store).export("firm")]
        await store.pool.execute("TRUNCATE memories CASCADE")
        bulk = BulkStore(store)
        # two batches, as the CLI imports: the chain is linked across them, and again imports nothing twice
        first = await bulk.import_batch(exported[:1], None)
        rest = await bulk.import_batch(exported[1:], None)
        again = await BulkStore(store).import_batch(exported, None)
        [hit] = await store.search("where is the office", namespace="firm", limit=1)
        history = await store.history(hit.memory.id)
    finally:
        await service.aclose()
    assert json.loads(json.dumps(exported))[1]["supersedes"] == a.id and exported[0]["valid_to"]
    assert (first, rest, again) == ((1, 0), (3, 0), (0, 4))
    assert hit.memory.content == c.content
    assert [m.content for m in history] == [
        "The office is in Leeds.",
        "The office moved to York.",
        "The office moved to Hull.",
    ]
    assert [m.valid_to is None for m in history] == [False, False, True]


async def test_the_migration_keeps_every_existing_memory_current(cortex_settings):
    """A database at migration 005 with memories in it: after 006 each one is current and found."""
    service = MemoryService(cortex_settings)
    pool = await connect(cortex_settings.database_url.get_secret_value(), 2)
    try:
        async with pool.acquire() as c:  # the migrations up to 005, as an older Frobozz left them
            from frobozz.memory import _database

            found = _database._migrations("frobozz.memory")
            await c.execute(
                "CREATE TABLE cortex_migrations (version int PRIMARY KEY, name text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for version, name, sql in found:
                if version <= 5:
                    await c.execute(sql.replace("{dim}", "384").replace("{model}", "all-MiniLM-L6-v2"))
                    await c.execute("INSERT INTO cortex_migrations (version, name) VALUES ($1, $2)", version, name)
            [vector] = await service.embedder.embed(["The lamp is in the living room."])
            await c.execute(
                "INSERT INTO memories (namespace, content, content_hash, embedding) VALUES "
                "('default', 'The lamp is in the living room.', 'h', $1)",
                vector,
            )
        store = await service.store()
        [hit] = await store.search("lamp", limit=1)
        recent = await store.recent(5, None)
    finally:
        await pool.close()
        await service.aclose()
    assert hit.memory.current and hit.memory.supersedes is None and [m.id for m in recent] == [hit.memory.id]


async def test_forget_says_in_its_result_and_its_text_that_the_version_before_is_current_again(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        lone = await call(client, "store", content="The lamp is lit.")
        old = await call(client, "store", content="Ana lives in Porto.")
        new = await call(client, "supersede", old_id=old["id"], content="Ana lives in Lisbon now.")
        alone = await call(client, "forget", id=lone["id"])
        result = await client.call_tool("forget", {"id": new["id"]})
        back = await call(client, "get", id=old["id"])
    assert alone["forgotten"] and alone["current_again"] is None and "current again" not in alone["said"]
    said = f"memory {old['id']}, the version it superseded, is current again"
    assert result.structured_content["current_again"] == old["id"] and said in result.structured_content["said"]
    assert said in result.content[0].text
    assert back["valid_to"] is None and back["superseded_by"] is None
