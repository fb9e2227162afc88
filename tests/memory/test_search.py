"""Several queries at once (the memory loop's recall): one embedding batch, each query's own hits."""

import os

import pytest

from frobozz.memory import MemoryStoreError
from frobozz.memory._search import Words, bm25

pytestmark = pytest.mark.anyio
NOTES = [
    "The user's sister Ana lives in Porto and teaches the cello.",
    "The user is allergic to peanuts.",
    "The user's car is a green 2009 Volvo estate.",
]


async def test_several_queries_on_nothing_find_nothing_each(memory_service):
    store = await memory_service.store()
    assert await store.search_many([], namespace="chat") == []
    assert await store.search_many(["the cello", "?!", "peanuts"], namespace="chat") == [[], [], []]


async def test_several_queries_at_once_find_what_each_finds_alone_in_the_order_asked(memory_service):
    store = await memory_service.store()
    for note in NOTES:
        await store.store(note, namespace="chat")
    queries = ["peanut allergy", "🎻?!", "Ana teaches the cello in Porto", "a green Volvo"]
    together = await store.search_many(queries, namespace="chat", limit=2, min_score=0.3)
    alone = [await store.search(q, namespace="chat", limit=2, min_score=0.3) for q in queries]
    assert [[(h.memory.id, round(h.score, 6)) for h in hits] for hits in together] == [
        [(h.memory.id, round(h.score, 6)) for h in hits] for hits in alone
    ]
    assert [hits[0].memory.content if hits else None for hits in together] == [NOTES[1], None, NOTES[0], NOTES[2]]


@pytest.mark.parametrize("bad", ["", "   ", "x" * 10_001])
async def test_one_bad_query_among_several_is_a_clear_error(memory_service, bad):
    store = await memory_service.store()
    with pytest.raises(MemoryStoreError, match="query"):
        await store.search_many(["the cello", bad], namespace="chat")


async def test_a_nul_in_a_query_is_taken_out_and_the_rest_searched(memory_service):
    """Postgres text holds no NUL: such a query (a prompt recall searched with) failed in the database."""
    store = await memory_service.store()
    for note in NOTES:
        await store.store(note, namespace="chat")
    with_nul = await store.search_many(["peanut\x00 allergy", "a green\x00\x00 Volvo"], namespace="chat", limit=2)
    without = await store.search_many(["peanut allergy", "a green Volvo"], namespace="chat", limit=2)
    assert [[(h.memory.id, round(h.score, 6)) for h in hits] for hits in with_nul] == [
        [(h.memory.id, round(h.score, 6)) for h in hits] for hits in without
    ]
    assert [hits[0].memory.content for hits in with_nul] == [NOTES[1], NOTES[2]]
    with pytest.raises(MemoryStoreError, match="empty"):
        await store.search("\x00 ", namespace="chat")


async def test_a_lone_surrogate_in_a_query_is_searched_as_u_fffd_with_the_rest_of_its_words(memory_service):
    """Postgres text holds no lone surrogate (an unpaired `\\ud800` escape, a byte read with surrogateescape):
    such a query was refused, while its NULs were taken out; now it is cleaned as what the archive keeps."""
    store = await memory_service.store()
    for note in NOTES:
        await store.store(note, namespace="chat")
    queries = ["peanut \ud800allergy", "a green \udcff Volvo"]
    with_surrogates = await store.search_many(queries, namespace="chat", limit=2)
    cleaned = await store.search_many(
        [q.replace("\ud800", "\ufffd").replace("\udcff", "\ufffd") for q in queries], namespace="chat", limit=2
    )
    assert [[(h.memory.id, round(h.score, 6)) for h in hits] for hits in with_surrogates] == [
        [(h.memory.id, round(h.score, 6)) for h in hits] for hits in cleaned
    ]
    assert [hits[0].memory.content for hits in with_surrogates] == [NOTES[1], NOTES[2]]
    assert await store.search("\udc80", namespace="chat") == []  # no word left to look for


async def test_a_word_pool_too_large_to_rank_gives_its_matches_unranked_and_the_same_scores(
    memory_service, monkeypatch
):
    from frobozz.memory import _search

    store = await memory_service.store()
    for n in range(8):
        await store.store(f"Lantern note {n}: the lantern was seen in room {n}.", namespace="chat")
    await store.store("The brass lantern is in the attic.", namespace="chat")
    ranked = await store.search("brass lantern", namespace="chat", limit=3)
    monkeypatch.setattr(_search, "RANK_CAP", 2)  # every pool here holds more: none is ranked
    unranked = await store.search("brass lantern", namespace="chat", limit=3)
    assert [(h.memory.id, h.score) for h in unranked] == [(h.memory.id, h.score) for h in ranked]
    assert unranked[0].memory.content == "The brass lantern is in the attic."


async def test_without_context_a_note_is_found_by_its_own_words_and_not_by_its_neighbours(memory_service):
    store = await memory_service.store()
    for note in (
        "In the Kitchen, the brown sack holds garlic.",
        "The loud room's echo stops when you say echo.",
        "A grating in the clearing opens with the skeleton key.",
    ):
        await store.store(note, {}, "notes")
    assert await store.search("Kitchen", namespace="empty-notes", context=False) == []
    in_context = await store.search("Kitchen", namespace="notes")
    likely = await store.search("Kitchen", namespace="notes", min_score=0.3)
    alone = await store.search("Kitchen", namespace="notes", min_score=0.3, context=False)
    # the neighbour holds "Kitchen" in its words in context and is found, but not as likely relevant (issue 38)
    assert len(in_context) >= 2
    assert [h.memory.content for h in likely] == ["In the Kitchen, the brown sack holds garlic."]
    assert [h.memory.content for h in alone] == ["In the Kitchen, the brown sack holds garlic."]


def test_a_memorys_own_words_score_as_if_its_neighbours_words_were_not_there():
    """One reading of the positions gives both BM25 scores: the own one ignores the neighbours' (B, C) marks."""
    words = Words(memories=40, own_length=9.0, idf={"lamp": 2.0, "troll": 1.0}, counts={"lamp": 3, "troll": 9})
    with_context, own = bm25("'lamp':3A,9B,12 'troll':4C", 30.0, words)
    assert own == bm25("'lamp':3A,12", 30.0, words)[0] == bm25("'lamp':3A,12", 30.0, words)[1]
    assert with_context > own > 0
    assert bm25("'troll':4C,7B", 30.0, words)[1] == 0.0
    assert bm25("", 30.0, words) == (0.0, 0.0)


async def test_a_window_ending_beyond_what_a_utc_time_can_say_is_the_first_or_last_moment_there_is(memory_service):
    """Year 1 at +01:00 and 9999-12-31 at -01:00 are out of UTC's range: the search failed with no reason."""
    from datetime import datetime, timedelta, timezone

    store = await memory_service.store()
    first, last = (
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-1))),
    )
    assert await store.search("cello", namespace="chat", since=first, until=last) == []  # the empty case
    await store.store(NOTES[0], namespace="chat")
    assert [h.memory.content for h in await store.search("cello", namespace="chat", since=first, until=last)] == [
        NOTES[0]
    ]
    assert await store.search("cello", namespace="chat", since=last) == []
    assert await store.search("cello", namespace="chat", until=first) == []


async def test_a_window_given_without_a_zone_is_local_time_and_out_of_range_ends_bound_nothing(memory_service):
    """Without a zone the database's driver reads local time: west of UTC 9999-12-31T23:59 is past UTC's end."""
    import time
    from datetime import datetime

    store = await memory_service.store()
    await store.store(NOTES[0], namespace="chat")
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        last, first = datetime(9999, 12, 31, 23, 59), datetime(1, 1, 1, 0, 0)
        found = await store.search("cello", namespace="chat", since=datetime(1, 1, 1, 5, 0), until=last)
        assert [h.memory.content for h in found] == [NOTES[0]]
        assert await store.search("cello", namespace="chat", until=first) == []
    finally:
        if zone is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = zone
        time.tzset()
