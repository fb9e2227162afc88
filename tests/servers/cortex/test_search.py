"""cortex search: nothing found is an empty list, scores are absolute, words count in context."""

from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from frobozz.memory import MemoryService
from frobozz.servers.cortex import Settings, create_server
from tests.servers.cortex import MEMORIES
from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio

MODES = ("hybrid", "semantic", "keyword")


async def _found(client, query, **arguments):
    return {mode: (await call(client, "search", query=query, mode=mode, **arguments))["results"] for mode in MODES}


async def test_every_mode_finds_nothing_in_an_empty_database(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        assert await _found(client, "where is the lamp") == {mode: [] for mode in MODES}
        assert await _found(client, "where is the lamp", namespace="elsewhere", min_score=0.5) == {m: [] for m in MODES}


async def test_every_mode_finds_nothing_in_an_empty_namespace_an_empty_window_or_among_forgotten_memories(
    cortex_settings,
):
    async with Client(create_server(cortex_settings)) as client:
        ids = [(await call(client, "store", content=text, namespace="full"))["id"] for text in MEMORIES]
        assert await _found(client, "Biscuit the dog", namespace="empty") == {mode: [] for mode in MODES}
        later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        earlier = (datetime.now(UTC) - timedelta(days=1)).isoformat()
        assert await _found(client, "Biscuit the dog", namespace="full", since=later) == {m: [] for m in MODES}
        assert await _found(client, "Biscuit the dog", namespace="full", until=earlier) == {m: [] for m in MODES}
        assert all(await _found(client, "Biscuit the dog", namespace="full", since=earlier, until=later))
        for memory_id in ids:
            await call(client, "forget", id=memory_id)
        assert await _found(client, "Biscuit the dog", namespace="full") == {mode: [] for mode in MODES}


@pytest.mark.parametrize("query", ["?!", "🐉🔦", "-- ' \" ; ()", "zqxj vbnm wkpf", "the of and"])
async def test_a_query_with_no_words_or_words_found_nowhere_returns_nothing_in_every_mode(cortex_settings, query):
    async with Client(create_server(cortex_settings)) as client:
        for text in MEMORIES:
            await call(client, "store", content=text)
        assert await _found(client, query) == {mode: [] for mode in MODES}


async def test_scores_are_absolute_near_one_for_the_same_text_and_near_zero_for_unrelated_text(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        lone = await call(client, "store", content=MEMORIES[2], namespace="lone")
        alone = await _found(client, MEMORIES[2], namespace="lone")
        for text in MEMORIES:
            await call(client, "store", content=text)
        exact = await _found(client, MEMORIES[2])
        unrelated = await _found(client, "Biscuit the dog loves the beach", min_score=0.0)
    assert [r["id"] for r in alone["hybrid"]] == [lone["id"]]
    assert all(0.8 <= r[0]["score"] <= 1.0 for r in (*alone.values(), *exact.values()))  # a lone result is not 0
    far = [r for r in unrelated["hybrid"] if r["content"] in MEMORIES[3:]]  # neither the dog's text nor its neighbours
    assert unrelated["hybrid"][0]["content"] == MEMORIES[0] and unrelated["hybrid"][0]["score"] > 0.6
    assert all(r["score"] < 0.1 for r in far)  # when they are found at all, they score next to nothing


async def test_a_score_does_not_depend_on_the_other_candidates(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        for text in MEMORIES:
            await call(client, "store", content=text)
        query = "which hot drink does the user like in the morning"
        many = await _found(client, query, limit=10)
        one = await _found(client, query, limit=1)
        tea = many["hybrid"][0]
        at = datetime.fromisoformat(tea["created_at"])
        window = await _found(client, query, since=at.isoformat(), until=(at + timedelta(microseconds=1)).isoformat())
    assert tea["content"] == MEMORIES[3]
    for mode in MODES:  # alone in its window, or the first of ten: the same score
        assert one[mode][0] == many[mode][0] and window[mode] == [r for r in many[mode] if r["id"] == tea["id"]]
    scores = [r["score"] for r in many["hybrid"]]
    assert scores == sorted(scores, reverse=True) and all(0.0 < s <= 1.0 for s in scores)


async def test_min_score_drops_weaker_results_and_a_bad_one_is_a_clear_error(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        for text in MEMORIES:
            await call(client, "store", content=text)
        everything = (await call(client, "search", query="the user's dog and the beach"))["results"]
        strong = (await call(client, "search", query="the user's dog and the beach", min_score=0.5))["results"]
        assert len(everything) > len(strong) == 1 and strong[0] == everything[0]
        assert (await call(client, "search", query="the user's dog and the beach", min_score=1.0))["results"] == []
        for bad in (-0.1, 1.5, "high"):
            assert (await client.call_tool("search", {"query": "dog", "min_score": bad})).is_error


async def test_explain_gives_the_parts_each_mode_is_made_of(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        for text in MEMORIES:
            await call(client, "store", content=text)
        found = await _found(client, "quarterly planning meeting", explain=True)
    assert set(found["hybrid"][0]["parts"]) == {"words", "coverage", "own", "bm25", "cosine", "closeness"}
    assert set(found["keyword"][0]["parts"]) == {"words", "coverage", "own", "bm25"}
    assert set(found["semantic"][0]["parts"]) == {"cosine", "closeness"}
    top = found["hybrid"][0]
    assert top["score"] == pytest.approx(0.6 * top["parts"]["words"] + 0.4 * top["parts"]["closeness"], abs=1e-5)
    keyword = found["keyword"][0]
    assert keyword["score"] == pytest.approx(keyword["parts"]["words"], abs=1e-5)
    assert keyword["score"] > 0.9  # the memory holds every word of the query


async def test_a_reply_is_found_by_the_words_of_what_it_answers_and_keyword_mode_keeps_to_its_own(cortex_settings):
    conversation = [
        "Alex: Did you ever make it to the pottery class in Lisbon?",
        "Sam: Yes! Last week, and I loved every minute of it.",
        *(
            f"Sam: Note {n} about {topic}."
            for n, topic in enumerate(["the car insurance", "a chess tournament", "the tax return", "sourdough bread"])
        ),
    ]
    async with Client(create_server(cortex_settings)) as client:
        ids = [(await call(client, "store", content=text))["id"] for text in conversation]
        hybrid = (await call(client, "search", query="When did Sam go to the pottery class in Lisbon?"))["results"]
        keyword = (await call(client, "search", query="pottery class Lisbon", mode="keyword"))["results"]
        await call(client, "forget", id=ids[0])  # its words leave its neighbours too
        after = await _found(client, "pottery Lisbon")
    assert [r["id"] for r in hybrid[:2]] == ids[:2]
    assert [r["id"] for r in keyword] == [ids[0]]
    assert after == {mode: [] for mode in MODES}


async def _statistics(store) -> tuple[list, list]:
    """The word statistics as kept by the triggers, and as counted afresh from the live memories."""
    async with store.connection() as c:
        kept = [
            tuple(r)
            for r in await c.fetch(
                "SELECT namespace, lexeme, memories FROM memory_words WHERE memories > 0 ORDER BY 1, 2"
            )
        ]
        counted = [
            tuple(r)
            for r in await c.fetch(
                "SELECT namespace, l, count(*) FROM memories, unnest(tsvector_to_array(fts)) l "
                "WHERE deleted_at IS NULL GROUP BY 1, 2 ORDER BY 1, 2"
            )
        ]
        kept += [
            tuple(r)
            for r in await c.fetch(
                "SELECT namespace, memories::int, length::int FROM memory_namespaces WHERE memories > 0 ORDER BY 1"
            )
        ]
        counted += [
            tuple(r)
            for r in await c.fetch(
                "SELECT namespace, count(*)::int, sum(cortex_length(setweight(fts, 'A')))::int FROM memories "
                "WHERE deleted_at IS NULL GROUP BY 1 ORDER BY 1"
            )
        ]
    return kept, counted


async def test_word_statistics_follow_every_write_path(cortex_settings):
    import anyio

    from frobozz.memory import BulkStore

    cortex = MemoryService(cortex_settings)
    try:
        store = await cortex.store()
        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(store.store, f"concurrent note {n} about the brass lantern", None, f"ns{n % 2}")
        first, _ = await store.store("The troll guards the bridge.")
        second, _ = await store.store("The thief stole the jewelled egg.")
        await store.update(first.id, "The troll sleeps under the bridge now.", None)
        await store.forget(second.id)
        await BulkStore(store).import_batch(
            [
                {"content": "Imported: the grue lurks in the dark."},
                {"content": "Imported elsewhere.", "namespace": "other"},
            ],
            None,
        )
        kept, counted = await _statistics(store)
        assert kept == counted and ("ns0", "lantern", 10) in kept and not any(w == "thief" for _, w, _ in kept)
        async with store.connection() as c:  # every live memory has its words in context, and only those
            assert (
                await c.fetchval(
                    "SELECT count(*) FROM memories m FULL JOIN memory_context c USING (id) "
                    "WHERE (m.deleted_at IS NULL) IS DISTINCT FROM (c.id IS NOT NULL)"
                )
                == 0
            )
    finally:
        await cortex.aclose()


async def test_migration_4_counts_words_and_builds_contexts_for_memories_already_stored(cortex_settings):
    from frobozz.memory._database import _migrations, connect

    pool = await connect(cortex_settings.database_url.get_secret_value(), 2)
    try:
        async with pool.acquire() as c:
            await c.execute(
                "CREATE TABLE cortex_migrations (version int PRIMARY KEY, name text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for version, name, sql in _migrations("frobozz.memory"):
                if version < 4:
                    await c.execute(sql.replace("{dim}", "384").replace("{model}", "all-MiniLM-L6-v2"))
                    await c.execute("INSERT INTO cortex_migrations VALUES ($1, $2)", version, name)
            for text in [
                "Alex: Did you ever make it to the pottery class in Lisbon?",
                "Sam: Yes! Last week, and I loved every minute of it.",
            ]:
                await c.execute(
                    "INSERT INTO memories (namespace, content, content_hash, embedding) "
                    "VALUES ('default', $1, md5($1), array_fill(0.1, ARRAY[384])::vector)",
                    text,
                )
    finally:
        await pool.close()
    cortex = MemoryService(cortex_settings)
    try:
        store = await cortex.store()  # applies migration 4 and on
        kept, counted = await _statistics(store)
        found = await store.search("pottery class Lisbon", mode="hybrid")
    finally:
        await cortex.aclose()
    assert kept == counted and len(kept) > 5
    assert [h.memory.content[:4] for h in found] == ["Alex", "Sam:"]


async def test_search_without_a_database_is_a_clear_error_not_an_empty_list(frobozz_env):
    settings = Settings(database_url="postgresql://nobody@127.0.0.1:9/none")
    async with Client(create_server(settings)) as client:
        assert "cannot reach the database" in await error(client, "search", query="lamp")


async def test_the_readme_examples_score_as_the_readme_says(cortex_settings):
    """README, "What a score means": its own words score as likely relevant; a paraphrase sharing no word
    does not; an unrelated note beside a keyword match, found by the neighbour's words only, stays under the
    0.3 of "likely relevant" (issue 38: a garlic note scored 0.32-0.40 and a 100,000-character "xxxx"
    0.31-0.41; a memory now holds at most 10,000 characters)."""
    async with Client(create_server(cortex_settings)) as client:
        for text in (
            "The brass lantern is in the living room.",
            "Buy garlic for the pasta sauce.",
            "The troll guards the bridge with an axe.",
            "x" * 10_000,
            "The mailbox is west of the house.",
        ):
            await call(client, "store", content=text)
        lantern = (await call(client, "search", query="where is the lantern", min_score=0.3))["results"]
        lamp = (await call(client, "search", query="where is the lamp", explain=True))["results"]
        troll = (await call(client, "search", query="troll", explain=True))["results"]
        likely = (await call(client, "search", query="troll", min_score=0.3))["results"]
    assert [r["content"] for r in lantern][:1] == ["The brass lantern is in the living room."]
    assert lamp[0]["content"].startswith("The brass lantern") and lamp[0]["score"] < 0.3
    garlic = next(r for r in troll if r["content"].startswith("Buy garlic"))
    xxxx = next(r for r in troll if r["content"].startswith("xxx"))
    assert troll[0]["content"].startswith("The troll") and troll[0]["score"] >= 0.3
    assert garlic["parts"]["own"] == xxxx["parts"]["own"] == 0 and 0 < garlic["score"] < 0.3 and xxxx["score"] < 0.3
    assert [r["content"] for r in likely] == ["The troll guards the bridge with an axe."]


async def test_a_conversation_line_counts_more_when_the_query_names_its_speaker(cortex_settings):
    """Hybrid only: the line's speaker, not a name said in it, and never a note that merely starts with a word."""
    lines = {
        "nate": "[1:00 pm on 8 May, 2023] Nate: I cooked a spicy curry for dinner.",
        "joanna": "[1:02 pm on 8 May, 2023] Joanna: I cooked a spicy curry for dinner with Nate.",
        "note": "Nate cooked a spicy curry for dinner: a note.",
    }
    async with Client(create_server(cortex_settings)) as client:
        assert (await call(client, "search", query="What did Nate cook?", explain=True))["results"] == []
        ids = {k: (await call(client, "store", content=v))["id"] for k, v in lines.items()}
        hybrid = (await call(client, "search", query="What did Nate cook for dinner?", explain=True))["results"]
        semantic = (
            await call(client, "search", query="What did Nate cook for dinner?", mode="semantic", explain=True)
        )["results"]
        lowercase = (await call(client, "search", query="what did nate cook for dinner?", explain=True))["results"]
    boosted = {r["id"] for r in hybrid if "speaker" in r["parts"]}
    assert boosted == {ids["nate"]} and hybrid[0]["id"] == ids["nate"]
    assert not any("speaker" in r["parts"] for r in semantic + lowercase)
