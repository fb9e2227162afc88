"""The word statistics as deltas (migration 009): no store waits for another's, and search scores exactly as
it did when the counts were rows that every store updated (migration 008)."""

from collections.abc import Iterator

import anyio
import pytest

from frobozz.memory import MemoryService, MemorySettings, MemoryStore
from frobozz.memory._database import _migrations, connect
from tests.conftest import database_url, fresh_database

pytestmark = pytest.mark.anyio

CONVERSATION = [
    "Alex: Did you ever make it to the pottery class in Lisbon?",
    "Sam: Yes! Last week, and I loved every minute of it.",
    "Alex: The brass lantern is in the attic, next to the old trunk.",
    "Sam: I left the garlic by the river for the troll.",
    "Alex: The troll guards the bridge with an axe.",
    "Sam: Note about the car insurance renewal in March.",
    "Alex: The quarterly planning meeting moved to Thursday.",
    "Sam: I bought sourdough bread and garlic at the market.",
    "Alex: The thief stole the jewelled egg from the nest.",
    "Sam: My sister plays in a chess tournament in Porto.",
    "Alex: The lantern battery is almost empty.",
    "Sam: We should paint the mailbox west of the house.",
]
ELSEWHERE = ["The river is cold in winter.", "A lantern and a sword lie on the table."]
QUERIES = [
    "When did Sam go to the pottery class in Lisbon?",
    "where is the lantern",
    "troll garlic river",
    "what did the thief steal",
    "zebra",  # in no memory
]
FORGOTTEN = (3, 8)  # forgotten after everything is stored: their words are counted, then uncounted
# The counts search reads (the views, 009; the tables they replace, 008), and the same counted afresh.
KEPT = """
SELECT (SELECT array_agg((namespace, memories, length)::text ORDER BY namespace) FROM memory_namespaces
        WHERE memories > 0)
       || (SELECT array_agg((namespace, lexeme, memories)::text ORDER BY namespace, lexeme) FROM memory_words
           WHERE memories > 0)"""
COUNTED = """
SELECT (SELECT array_agg((namespace, n, length)::text ORDER BY namespace) FROM (
            SELECT namespace, count(*) AS n, sum(cortex_length(setweight(fts, 'A'))) AS length FROM memories
            WHERE deleted_at IS NULL GROUP BY 1) t)
       || (SELECT array_agg((namespace, lexeme, n)::text ORDER BY namespace, lexeme) FROM (
            SELECT namespace, l AS lexeme, count(*) AS n FROM memories, unnest(tsvector_to_array(fts)) l
            WHERE deleted_at IS NULL GROUP BY 1, 2) t)"""


@pytest.fixture
def two_databases(postgres) -> Iterator[tuple[MemorySettings, ...]]:
    """Settings on two fresh databases of the test's own (the shared fixture gives one)."""
    with fresh_database(postgres) as one, fresh_database(postgres) as other:
        yield tuple(MemorySettings(database_url=database_url(postgres, name)) for name in (one, other))


async def _migrated_to(pool, last: int) -> None:
    """The migrations up to `last`, as an older Frobozz left its database."""
    async with pool.acquire() as c:
        await c.execute(
            "CREATE TABLE cortex_migrations (version int PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, sql in _migrations("frobozz.memory"):
            if version <= last:
                await c.execute(sql.replace("{dim}", "384").replace("{model}", "all-MiniLM-L6-v2"))
                await c.execute("INSERT INTO cortex_migrations (version, name) VALUES ($1, $2)", version, name)


async def _store(store: MemoryStore, texts: list[str], namespace: str = "default") -> None:
    """Store as `MemoryStore.store` does (`cortex_store`, 008): a database at 008 has no later code."""
    vectors = await store.embedder.embed(texts)
    async with store.connection() as c:
        for text, vector in zip(texts, vectors, strict=True):
            await c.fetchrow(
                "SELECT id FROM cortex_store($1, $2, md5($2), '{}'::jsonb, NULL, $3)", namespace, text, vector
            )


async def _forget(store: MemoryStore) -> None:
    async with store.connection() as c:
        for n in FORGOTTEN:
            row = await c.fetchrow(
                "UPDATE memories SET deleted_at = now() WHERE content = $1 RETURNING id", CONVERSATION[n]
            )
            await c.execute("SELECT cortex_refresh_context('default', $1::bigint[])", [row["id"]])


async def _results(store: MemoryStore) -> list:
    """Every query in every mode, in both namespaces: the ranked ids with their scores and score parts."""
    found = []
    for namespace in ("default", "elsewhere"):
        for mode in ("hybrid", "semantic", "keyword"):
            for query in QUERIES:
                hits = await store.search(query, namespace=namespace, mode=mode)
                found.append([(h.memory.id, h.score, h.parts) for h in hits])
    return found


async def _statistics(store: MemoryStore) -> tuple[list[str], list[str]]:
    async with store.connection() as c:
        return await c.fetchval(KEPT), await c.fetchval(COUNTED)


async def test_search_scores_the_same_from_counted_rows_deltas_folded_totals_and_both(two_databases):
    """The same memories in two databases: one filled at migration 008 (every store updating the count rows)
    and then upgraded, one at 009 (deltas), searched unfolded, half folded and folded. Every ranked id, score
    and score part is the same, to the last digit."""
    with anyio.fail_after(600):
        old, new = (MemoryService(settings) for settings in two_databases)
        pool = await connect(old.settings.database_url.get_secret_value(), 2)
        try:
            await _migrated_to(pool, 8)
            before = MemoryStore(pool, old.embedder, default_namespace="default", max_chars=10_000)
            assert await _results(before) == [[]] * 30  # the empty case first
            await _store(before, CONVERSATION)
            await _store(before, ELSEWHERE, "elsewhere")
            await _forget(before)
            at_8, counts_at_8 = await _results(before), await _statistics(before)
            upgraded = await old.store()  # applies 009 to a database with memories in it
            after_upgrade, counts_after_upgrade = await _results(upgraded), await _statistics(upgraded)
            async with upgraded.connection() as c:
                undone = await c.fetchval("SELECT count(*) FROM memory_word_deltas")

            store = await new.store()
            await _store(store, CONVERSATION[:6])
            async with store.connection() as c:
                assert await c.fetchval("SELECT cortex_fold()") > 6  # a namespace row and its words, each memory
            for text in CONVERSATION[6:]:  # as a client stores: the memory, then its words in context (009)
                await store.store(text)
            await _store(store, ELSEWHERE, "elsewhere")
            await _forget(store)
            half_folded, counts_half_folded = await _results(store), await _statistics(store)
            async with store.connection() as c:
                await c.execute("SELECT cortex_fold()")
                left = await c.fetchval("SELECT count(*) FROM memory_word_deltas")
                assert await c.fetchval("SELECT cortex_fold()") == 0  # nothing left to fold
            folded, counts_folded = await _results(store), await _statistics(store)
        finally:
            await pool.close()
            await old.aclose()
            await new.aclose()
    assert at_8[0] and at_8[0][0][1] > 0.3  # found, and well
    assert after_upgrade == at_8 and half_folded == at_8 and folded == at_8
    assert counts_at_8[0] == counts_at_8[1]  # the rows as 008 kept them agreed with a recount
    assert counts_after_upgrade == counts_half_folded == counts_folded == counts_at_8
    assert undone == 0 and left == 0


async def test_a_store_does_not_wait_for_an_import_counting_its_words_into_the_same_namespace(memory_service):
    """Before 009 every write updated its namespace's count row, so a store into the namespace waited until any
    write there committed: an import (which inserts a batch, then refreshes its words in context) held every store
    up for the whole batch. Here an import stays uncommitted, its memory counted, while others store, and a fold
    runs, past it; only its refresh takes turns with theirs."""
    store = await memory_service.store()
    [vector] = await store.embedder.embed(["The lantern is lit."])
    with anyio.fail_after(120):
        async with store.connection() as first, first.transaction():
            imported = await first.fetchval(
                "INSERT INTO memories (namespace, content, content_hash, embedding, created_at) VALUES "
                "('default', 'The lantern is lit.', 'h', $1, '2000-01-01') RETURNING id",
                vector,
            )
            async with anyio.create_task_group() as tg:
                for n in range(6):
                    tg.start_soon(store.store, f"Note {n}: the lantern and the troll.")
            async with store.connection() as c:
                assert await c.fetchval("SELECT cortex_fold()") > 6  # skips the uncommitted delta, waits for none
            assert await store.namespaces() == {"default": 6}  # not committed yet, so not counted
            await first.execute("SELECT cortex_refresh_context('default', $1::bigint[])", [imported])
    assert (await store.search("lit lantern", mode="keyword", limit=1))[0].memory.content == "The lantern is lit."
    kept, counted = await _statistics(store)
    assert kept == counted and "(default,lantern,7)" in kept


async def test_counts_stay_exact_while_stores_forgets_and_folds_run_at_once(memory_service):
    store = await memory_service.store()

    async def fold(times: int) -> None:
        for _ in range(times):
            async with store.connection() as c:
                await c.execute("SELECT cortex_fold()")

    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            for n in range(40):
                tg.start_soon(store.store, f"Note {n % 20}: the brass lantern near the river.", None, "ns")
            tg.start_soon(fold, 10)
            tg.start_soon(fold, 10)
        ids = [m.id for m in await store.recent(20, "ns")]
        async with anyio.create_task_group() as tg:
            for memory_id in ids[:5]:
                tg.start_soon(store.forget, memory_id)
            tg.start_soon(fold, 5)
        async with store.connection() as c:  # each memory's words in context as if written one at a time
            refreshed = await c.fetch("SELECT id, words FROM memory_context ORDER BY id")
            await c.execute("SELECT cortex_rebuild_context('ns')")
            rebuilt = await c.fetch("SELECT id, words FROM memory_context ORDER BY id")
    kept, counted = await _statistics(store)
    assert kept == counted and "(ns,lantern,15)" in kept
    assert len(refreshed) == 15 and refreshed == rebuilt
    assert await store.namespaces() == {"ns": 15}


async def test_a_memory_whose_words_in_context_a_crash_lost_is_refreshed_when_the_store_is_next_opened(cortex_settings):
    """A store is two transactions (009): the memory, then its words in its neighbours' context, committed without
    waiting for the disk. Left with the first only (as a crash between them would), the next process to open the
    store refreshes it, and searches score as if nothing had happened."""
    first = MemoryService(cortex_settings)
    try:
        store = await first.store()
        assert await store.heal() == 0  # the empty case
        for text in CONVERSATION[:4]:
            await store.store(text)
        whole = await _results(store)
        async with store.connection() as c:  # the last memory as a crash after its first transaction leaves it
            await c.execute("DELETE FROM memory_context WHERE id = (SELECT max(id) FROM memories)")
            await c.execute(  # and its neighbours without its words
                "UPDATE memory_context SET words = ts_delete(words, $1::text[]) "
                "WHERE id < (SELECT max(id) FROM memories)",
                ["troll", "river", "garlic"],
            )
        broken = await _results(store)
    finally:
        await first.aclose()
    second = MemoryService(cortex_settings)
    try:
        healed = await _results(await second.store())
    finally:
        await second.aclose()
    assert broken != whole and healed == whole


async def test_a_store_whose_second_step_fails_says_the_memory_is_kept_and_the_next_open_heals_it(
    cortex_settings, caplog
):
    """The memory is committed before its words go into its neighbours' context: a failure there (here the step's
    function is gone) must not call the store failed (a retry would find it a duplicate of itself)."""
    first = MemoryService(cortex_settings)
    try:
        store = await first.store()
        for text in CONVERSATION[:3]:
            await store.store(text)
        whole = await _results(store)
        async with store.connection() as c:
            await c.execute("ALTER FUNCTION cortex_settle(text, bigint[]) RENAME TO cortex_settle_away")
        try:
            kept, existing = await store.store(CONVERSATION[3])
        finally:
            async with store.connection() as c:
                await c.execute("ALTER FUNCTION cortex_settle_away(text, bigint[]) RENAME TO cortex_settle")
        assert existing is None and kept.content == CONVERSATION[3]
        assert "is stored; its words in its neighbours' context are not yet" in caplog.text
        assert (await store.store(CONVERSATION[3]))[1] == kept.id  # a retry finds it kept, as said
    finally:
        await first.aclose()
    second = MemoryService(cortex_settings)  # the next open heals what the failed step left undone
    try:
        store = await second.store()
        async with store.connection() as c:
            assert await c.fetchval("SELECT count(*) FROM memory_context WHERE id = $1", kept.id) == 1
        assert await store.heal() == 0  # nothing left for another open
        assert len(whole) == 30 and (await _results(store))[:1] != [[]]  # and search goes on, over all four
    finally:
        await second.aclose()
