"""The memory loop's records: sessions, archive, seen-set, suggestions, capsules, on a real Postgres."""

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from frobozz.memory import MemoryStoreError

pytestmark = pytest.mark.anyio


async def test_everything_is_empty_before_anything_is_said(sessions):
    assert await sessions.list() == [] and await sessions.list("elsewhere") == [] and await sessions.namespaces() == []
    assert await sessions.search_archive("lamp") == [] and await sessions.search_archive() == []
    assert await sessions.capsule(None, "earlier today") is None
    session = await sessions.open("quiet")
    assert await sessions.transcript(session.id) == []
    assert await sessions.unseen(session.id, []) == [] and await sessions.suggestions(session.id) == []
    assert await sessions.clear_suggestions(session.id) == 0
    assert session.preview == "" and (await sessions.list("quiet"))[0].id == session.id
    await sessions.open("louder")
    assert await sessions.namespaces() == ["louder", "quiet"]  # the most recently active first


async def test_the_archive_keeps_every_turn_in_order_and_finds_it_by_words_and_date(sessions):
    session = await sessions.open("chat", client="test")
    await sessions.archive(session.id, 1, "user", "Where did I leave the brass lantern?")
    await sessions.archive(session.id, 1, "tool_use", "cortex.search", {"query": "brass lantern"})
    await sessions.archive(session.id, 1, "assistant", "In the living room, by the trophy case.")
    await sessions.archive(session.id, 1, "usage", "", {"input_tokens": 12, "output_tokens": 9})
    other = await sessions.open("elsewhere")
    await sessions.archive(other.id, 1, "user", "The lantern elsewhere.")
    entries = await sessions.transcript(session.id)
    assert [e.kind for e in entries] == ["user", "tool_use", "assistant", "usage"]
    assert entries[1].data == {"query": "brass lantern"}
    found = await sessions.search_archive("lanterns", namespace="chat")
    assert [e.content for e in found] == ["Where did I leave the brass lantern?"]
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert await sessions.search_archive("lantern", namespace="chat", since=later) == []
    assert await sessions.search_archive("?!", namespace="chat") == []
    assert len(await sessions.search_archive(namespace="chat", until=later)) == 4
    listed = await sessions.list("chat")
    assert listed[0].preview == "Where did I leave the brass lantern?" and listed[0].client == "test"
    assert listed[0].last_active_at >= listed[0].created_at


async def test_a_resumed_session_keeps_its_seen_set_and_suggestions_until_they_are_stored(sessions):
    session = await sessions.open("chat")
    await sessions.mark_seen(session.id, [3, 5])
    await sessions.suggest(session.id, ["The user's cat is called Mog.", "  ", "The user's cat is called Mog."])
    resumed = await sessions.open(session_id=session.id)
    assert resumed.id == session.id and await sessions.unseen(resumed.id, [5, 7, 3, 9]) == [7, 9]
    assert await sessions.suggestions(resumed.id) == ["The user's cat is called Mog."]
    assert await sessions.clear_suggestions(resumed.id) == 1 and await sessions.suggestions(resumed.id) == []


async def test_windows_and_capsules_move_forward(sessions):
    session = await sessions.open("chat")
    first = await sessions.new_window(session.id)
    second = await sessions.new_window(session.id)
    assert second > first and (await sessions.get(session.id)).window_started_at == second
    await sessions.put_capsule("chat", "earlier today", 10, "We talked about the lantern.")
    await sessions.put_capsule("chat", "earlier today", 12, "We talked about the lantern and the troll.")
    capsule = await sessions.capsule("chat", "earlier today")
    assert capsule.until_id == 12 and "troll" in capsule.summary


@pytest.mark.parametrize("bad", ["", "../x", "a b", "x" * 101, "'; DROP TABLE loop_sessions; --"])
async def test_bad_session_ids_and_kinds_are_clear_errors_that_write_nothing(sessions, bad):
    with pytest.raises(MemoryStoreError, match="invalid session id"):
        await sessions.archive(bad, 1, "user", "hello")
    with pytest.raises(MemoryStoreError, match="no session"):
        await sessions.open(session_id="missing")
    session = await sessions.open("chat")
    with pytest.raises(MemoryStoreError, match="unknown archive kind"):
        await sessions.archive(session.id, 1, "shout", "hello")  # type: ignore[arg-type]
    with pytest.raises(MemoryStoreError, match="invalid namespace"):
        await sessions.open("../etc")
    assert await sessions.transcript(session.id) == []


async def test_hostile_and_huge_text_is_archived_exactly_or_cut_to_the_limit(sessions):
    session = await sessions.open("chat")
    for text in ["'); DROP TABLE loop_archive; --", "Unicode: Zürich, 東京, 🐉", "NUL\0inside"]:
        await sessions.archive(session.id, 1, "user", text)
    await sessions.archive(session.id, 2, "assistant", "y" * 300_000)
    entries = await sessions.transcript(session.id)
    assert [e.content for e in entries[:3]] == [
        "'); DROP TABLE loop_archive; --",
        "Unicode: Zürich, 東京, 🐉",
        "NULinside",
    ]
    assert len(entries[3].content) == 200_000


async def test_text_that_is_not_utf8_is_archived_with_each_lone_surrogate_made_a_replacement_character(sessions):
    """A line typed in Latin-1 (read with surrogateescape) or an unpaired JSON escape was a DataError from the
    database: the chat ended in a traceback, and a hook's turn went unarchived."""
    session = await sessions.open("chat", client="caf\udce9")
    entry = await sessions.archive(
        session.id, 1, "user", "\udcff\udcfe bad utf8 \ud800\0", {"said\udcff": ["\udce9t\0\u00e9", 1]}
    )
    assert entry.content == "\ufffd\ufffd bad utf8 \ufffd" and entry.data == {"said\ufffd": ["\ufffdt\u00e9", 1]}
    await sessions.suggest(session.id, ["The user's caf\udce9 is open."])
    await sessions.put_capsule("chat", "earlier \udce9", 1, "We talked\udcff.")
    assert await sessions.suggestions(session.id) == ["The user's caf\ufffd is open."]
    assert (await sessions.capsule("chat", "earlier \udce9")).summary == "We talked\ufffd."
    [listed] = await sessions.list("chat")
    assert listed.preview == "\ufffd\ufffd bad utf8 \ufffd" and listed.client == "caf\ufffd"


async def test_concurrent_writers_lose_no_entry(sessions):
    session = await sessions.open("chat")
    async with anyio.create_task_group() as tg:
        for n in range(30):
            tg.start_soon(sessions.archive, session.id, n, "assistant", f"part {n}")
    assert sorted(e.turn for e in await sessions.transcript(session.id)) == list(range(30))


async def test_marking_seen_in_a_session_that_does_not_exist_is_a_clear_error(sessions):
    with pytest.raises(MemoryStoreError, match="no loop session 'gone': open one first"):
        await sessions.mark_seen("gone", [1])


async def test_adopt_opens_a_session_under_a_clients_own_id_once_and_refuses_a_bad_one(sessions):
    """Claude Code's hooks key the loop on claude's session id: the first hook opens it, the next find it."""
    first = await sessions.adopt("0b9c2f0e-1d2a-4c3b-9e8f-7a6b5c4d3e2f", "proj", client="claude code")
    again = await sessions.adopt(first.id, "elsewhere")
    assert first.id == again.id and again.namespace == "proj" and again.client == "claude code"
    assert [s.id for s in await sessions.list("proj")] == [first.id]
    for bad in ("", "../etc", "x" * 101):
        with pytest.raises(MemoryStoreError):
            await sessions.adopt(bad, "proj")
    assert len(await sessions.list("proj")) == 1
