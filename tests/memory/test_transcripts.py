"""claude's transcripts in Postgres (TranscriptStore), on the real embedded Postgres: the official Agent SDK's
conformance suite, the empty store, bad keys and entries, concurrent writers, a database that goes away,
and a real claude session mirrored into it on one machine and resumed from it on another."""

import secrets

import anyio
import pytest
from claude_agent_sdk.testing import run_session_store_conformance

from frobozz.engine import Engine, Result
from frobozz.engine.testing import ScriptedModel, replies
from frobozz.memory import DatabaseError, MemorySettings, MemoryStoreError, TranscriptStore
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio
KEY = {"project_key": "zork", "session_id": "s1"}


@pytest.fixture
async def store(cortex_settings):
    opened = await TranscriptStore.open(cortex_settings)
    try:
        yield opened
    finally:
        await opened.aclose()


def entry(n: int, **more) -> dict:
    return {"type": "user", "uuid": f"u{n}", "message": {"role": "user", "content": f"turn {n}"}, **more}


async def test_the_official_sdks_conformance_suite_passes(store):
    async def fresh() -> TranscriptStore:
        await store.pool.execute("TRUNCATE claude_transcripts CASCADE")
        return store

    await run_session_store_conformance(fresh)


async def test_an_empty_store_loads_nothing_and_lists_nothing(store):
    assert await store.load(KEY) is None
    assert await store.list_sessions("zork") == [] and await store.list_session_summaries("zork") == []
    assert await store.list_subkeys(KEY) == []
    await store.delete(KEY)  # nothing to delete is no error
    await store.append(KEY, [])
    assert await store.load(KEY) is None  # an empty append writes nothing


async def test_an_entry_appended_twice_is_kept_once_and_entries_without_uuid_always(store):
    await store.append(KEY, [entry(1), entry(2), {"type": "last-prompt", "lastPrompt": "turn 2"}])
    await store.append(KEY, [entry(2), entry(3), {"type": "last-prompt", "lastPrompt": "turn 3"}])  # a retry
    loaded = await store.load(KEY)
    assert [e.get("uuid") for e in loaded] == ["u1", "u2", None, "u3", None]
    summary = (await store.list_session_summaries("zork"))[0]
    assert summary["data"]["first_prompt"] == "turn 1" and summary["data"]["last_prompt"] == "turn 3"


async def test_bad_keys_and_entries_are_clear_errors_and_change_nothing(store):
    await store.append(KEY, [entry(1)])
    for bad in (
        {},
        {"project_key": "", "session_id": "s"},
        {"project_key": "p", "session_id": 7},
        {"project_key": "p\x00", "session_id": "s"},
    ):
        with pytest.raises(MemoryStoreError, match="project_key and a session_id"):
            await store.append(bad, [entry(9)])
    hostile = {"project_key": "'; DROP TABLE claude_transcripts; --", "session_id": "../../" + "x" * 10_000}
    await store.append(hostile, [entry(1)])
    assert await store.load(hostile) == [entry(1)]
    huge = entry(2, blob="z" * 5_000_000)
    await store.append(KEY, [huge])
    assert await store.load(KEY) == [entry(1), huge]


async def test_a_nul_in_an_entry_is_taken_out_and_the_rest_of_the_batch_kept(store):
    """Postgres' JSON holds no NUL: a batch with one in any entry was refused whole (a session's whole transcript)."""
    await store.append(
        KEY,
        [
            {"type": "user", "uuid": "u\x001", "message": {"role": "user", "content": "hel\x00lo"}},
            {"type": "assistant", "uuid": "u2", "k\x00": ["\x00", {"n": 1}], "text": "a\\u0000b"},
            entry(3),
        ],
    )
    assert await store.load(KEY) == [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "uuid": "u2", "k": ["", {"n": 1}], "text": "a\\u0000b"},  # (a backslash: kept)
        entry(3),
    ]
    assert (await store.list_session_summaries("zork"))[0]["data"]["first_prompt"] == "hello"


async def test_a_lone_surrogate_in_an_entry_is_made_a_replacement_character_and_the_batch_kept(store):
    """A transcript line with a `\\ud800` escape (Python's JSON reads it; no UTF-8 holds it) failed the whole
    session's archive with a TypeError from the JSON encoder."""
    import json

    odd = json.loads('{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "a\\ud800b"}}')
    await store.append(KEY, [odd, entry(2)])
    assert await store.load(KEY) == [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "a\ufffdb"}},
        entry(2),
    ]


async def test_concurrent_writers_to_one_session_lose_nothing_and_fold_one_summary(cortex_settings, store):
    other = await TranscriptStore.open(cortex_settings)
    try:
        async with anyio.create_task_group() as tg:
            for writer, first in ((store, 0), (other, 1000)):
                for n in range(first, first + 20):
                    tg.start_soon(writer.append, KEY, [entry(n)])
    finally:
        await other.aclose()
    loaded = await store.load(KEY)
    assert sorted(e["uuid"] for e in loaded) == sorted(
        [f"u{n}" for n in range(20)] + [f"u{n}" for n in range(1000, 1020)]
    )
    listed = await store.list_sessions("zork")
    assert len(listed) == 1 and (await store.list_session_summaries("zork"))[0]["mtime"] == listed[0]["mtime"]


async def test_a_database_that_is_unreachable_or_drops_its_connections_is_a_database_error_and_loses_nothing(store):
    with pytest.raises(DatabaseError):
        await TranscriptStore.open(MemorySettings(database_url="postgresql://nobody@127.0.0.1:9/none"))
    await store.append(KEY, [entry(1)])
    await store.pool.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    failures = []
    with anyio.fail_after(30):
        while True:  # what the mirror does: try again (a raw asyncpg error here would fail the test)
            try:
                await store.append(KEY, [entry(2)])
                break
            except DatabaseError as e:
                failures.append(e)
    assert [e["uuid"] for e in await store.load(KEY)] == ["u1", "u2"]
    await store.pool.close()
    with pytest.raises(DatabaseError, match="transcript store failed"):
        await store.load(KEY)


async def test_a_real_session_mirrored_into_postgres_resumes_on_a_machine_that_never_saw_it(
    store, make_options, tmp_path
):
    project = f"run-{secrets.token_hex(4)}"
    async with ScriptedModel(replies("the troll is west", "west, with an axe")) as model:
        homes = [tmp_path / "one", tmp_path / "two"]
        for home in homes:
            home.mkdir()
        async with Engine(
            make_options(model, env={"HOME": str(homes[0])}, session_store=store, session_project=project)
        ) as engine:
            await engine.start()
            await engine.send("where is the troll?")
            session = (await until(engine.events(), Result))[-1].session_id
        async with Engine(
            make_options(model, env={"HOME": str(homes[1])}, session_store=store, session_project=project)
        ) as engine:
            await engine.start(session)
            await engine.send("and what does it carry?")
            result = (await until(engine.events(), Result))[-1]
    assert result.session_id == session and "where is the troll?" in str(model.requests[1].body["messages"])
    assert [s["session_id"] for s in await store.list_sessions(project)] == [session]
    assert "and what does it carry?" in str(await store.load({"project_key": project, "session_id": session}))
