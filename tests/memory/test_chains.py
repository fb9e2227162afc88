"""The chains of changed facts when a version is forgotten, imported out of order or imported again, and what
re-embedding counts."""

import anyio
import pytest

from frobozz.memory import BulkStore, MemoryStoreError
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def chain(store, *texts, namespace="default"):
    first = (await store.store(texts[0], namespace=namespace))[0]
    made = [first]
    for text in texts[1:]:
        made.append(await store.supersede(made[-1].id, text))
    return [m.id for m in made]


async def test_forgetting_a_memory_of_no_chain_leaves_the_others_as_they_were(memory_service):
    store = await memory_service.store()
    [a] = await chain(store, "Bob has a red car.")
    [b] = await chain(store, "Ann has a bike.")
    forgotten = await store.forget(a)
    assert forgotten.memory.supersedes is None and forgotten.memory.superseded_by is None
    assert forgotten.said is None  # nothing more to say
    assert [m.id for m in await store.recent(5, None)] == [b]
    assert (await store.get(b)).current


async def test_forgetting_the_current_version_makes_the_one_it_superseded_current_again(memory_service):
    store = await memory_service.store()
    red, blue, green = await chain(store, "Bob has a red car.", "Bob has a blue car.", "Bob has a green car.")
    forgotten = await store.forget(green)
    assert (forgotten.memory.id, forgotten.current_again, forgotten.kept_as_history) == (green, blue, None)
    assert forgotten.said == f"memory {blue}, the version it superseded, is current again"
    back = await store.get(blue)
    assert back.current and back.superseded_by is None
    assert [h.memory.id for h in await store.search("what car does Bob have", limit=5)] == [blue]
    assert [m.id for m in await store.recent(5, None)] == [blue]
    assert [m.id for m in await store.history(red)] == [red, blue]
    newer = await store.supersede(blue, "Bob has a yellow car.")  # the fact can change again
    assert [m.id for m in await store.history(red)] == [red, blue, newer.id]


async def test_forgetting_every_version_newest_first_leaves_nothing_current(memory_service):
    store = await memory_service.store()
    red, blue = await chain(store, "Bob has a red car.", "Bob has a blue car.")
    await store.forget(blue)
    assert (await store.get(red)).current
    await store.forget(red)
    assert await store.recent(5, None) == []


async def test_a_version_whose_text_is_current_as_another_memory_stays_history_when_its_successor_is_forgotten(
    memory_service,
):
    store = await memory_service.store()
    red, blue = await chain(store, "Bob has a red car.", "Bob has a blue car.")
    again, _ = await store.store("Bob has a red car.")  # the old text stored again: current as another memory
    forgotten = await store.forget(blue)
    assert (forgotten.current_again, forgotten.kept_as_history) == (None, red)
    assert forgotten.said and "stays history" in forgotten.said
    kept = await store.get(red)
    assert not kept.current and kept.superseded_by is None
    assert [m.id for m in await store.recent(5, None)] == [again.id]


async def test_forgetting_a_middle_version_links_the_versions_either_side_in_the_store_and_the_export(
    memory_service,
):
    store = await memory_service.store()
    one, two, three = await chain(store, "Bob has a red car.", "Bob has a blue car.", "Bob has a green car.")
    assert (await store.forget(two)).said is None  # nothing became current
    first, last = await store.get(one), await store.get(three)
    assert (first.superseded_by, last.supersedes) == (three, one) and last.current and not first.current
    hits = await store.search("Bob car", include_history=True, limit=5)
    assert {h.memory.id: h.memory.superseded_by for h in hits} == {one: three, three: None}
    exported = [r async for r in BulkStore(store).export(None)]
    assert [(r["id"], r.get("supersedes")) for r in exported] == [(one, None), (three, one)]


# the lock each write takes to refresh the words in context of its namespace (migration 009), held here by the test
NAMESPACE_LOCK = "SELECT pg_advisory_lock(1668577396, hashtext('default'))"


@pytest.mark.parametrize("pair", [(1, 2), (0, 1)], ids=["middle-and-current", "oldest-and-middle"])
async def test_two_neighbouring_versions_forgotten_at_the_same_moment_are_both_forgotten_leaving_one_chain(
    memory_service, pair
):
    """Each forget is held at the namespace's lock until both are inside their transactions: before the chain was
    locked first, each held its own row there and then waited for the other's (a deadlock, one forget failing)."""
    store = await memory_service.store()
    ids = await chain(store, "Bob has a red car.", "Bob has a blue car.", "Bob has a green car.")
    [kept] = [i for n, i in enumerate(ids) if n not in pair]
    failed: list[BaseException] = []

    async def forget(memory_id):
        try:
            await store.forget(memory_id)
        except Exception as e:  # noqa: BLE001 - said by the assertion below
            failed.append(e)

    async def waiting() -> bool:
        return await store.pool.fetchval(
            "SELECT count(*) = 2 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )

    with anyio.fail_after(30):
        async with store.pool.acquire() as holder:
            await holder.execute(NAMESPACE_LOCK)
            async with anyio.create_task_group() as tg:
                for n in pair:
                    tg.start_soon(forget, ids[n])
                await eventually(waiting)  # both inside: one waits at the namespace's lock, the other at it or a row
                await holder.execute("SELECT pg_advisory_unlock_all()")
    assert failed == []
    left = await store.get(kept)
    assert left.current and (left.supersedes, left.superseded_by) == (None, None)
    assert [m.id for m in await store.history(kept)] == [kept]
    assert [m.id for m in await store.recent(5, None)] == [kept]
    for n in pair:
        with pytest.raises(MemoryStoreError, match="no memory"):
            await store.get(ids[n])


async def test_an_import_links_the_chain_whatever_the_order_of_its_lines_and_batches(memory_service):
    store = await memory_service.store()
    await chain(store, "The office is in Leeds.", "The office moved to York.", "The office moved to Hull.")
    exported = [r async for r in BulkStore(store).export(None)]
    await store.pool.execute("TRUNCATE memories CASCADE")
    bulk = BulkStore(store)
    backwards = exported[::-1]
    assert await bulk.import_batch(backwards[:1], None) == (1, 0)
    assert await bulk.import_batch(backwards[1:], None) == (2, 0)
    [hit] = await store.search("where is the office", limit=1)
    history = await store.history(hit.memory.id)
    assert [m.content for m in history] == [r["content"] for r in exported]
    assert [(m.supersedes, m.superseded_by) for m in history] == [
        (None, history[1].id),
        (history[0].id, history[2].id),
        (history[1].id, None),
    ]


async def test_importing_again_repairs_a_chain_an_earlier_import_left_unlinked(memory_service):
    store = await memory_service.store()
    await chain(store, "The office is in Leeds.", "The office moved to York.")
    exported = [r async for r in BulkStore(store).export(None)]
    await store.pool.execute("TRUNCATE memories CASCADE")
    unlinked = [{k: v for k, v in r.items() if k != "supersedes"} for r in exported]  # as a broken import left it
    assert await BulkStore(store).import_batch(unlinked, None) == (2, 0)
    assert await BulkStore(store).import_batch(exported, None) == (0, 2)
    [hit] = await store.search("where is the office", limit=1)
    assert [m.content for m in await store.history(hit.memory.id)] == [r["content"] for r in exported]


async def test_reembed_counts_the_memories_it_re_embedded_not_forgotten_ones(memory_service):
    store = await memory_service.store()
    assert await BulkStore(store).reembed() == 0
    for text in ("The lamp is lit.", "The door is shut.", "The troll is asleep."):
        await store.store(text)
    await store.forget((await store.recent(1, None))[0].id)
    batches: list[int] = []
    assert await BulkStore(store).reembed(batches.append, batch=2) == 2
    assert sum(batches) == 2
    assert [h.memory.content for h in await store.search("is the lamp lit", limit=1)] == ["The lamp is lit."]
    with pytest.raises(MemoryStoreError, match="no memory"):
        await store.get(3)
