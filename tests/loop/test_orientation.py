"""Orientation: each section from its provider; a provider that fails or is slow is left out."""

import logging
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from frobozz.loop import Section, Window, capsules, context_files, here_and_now, latest_letter, memories, orientation

pytestmark = pytest.mark.anyio
WINDOW = Window(namespace="chat", session_id="s1", previous_start=None, topic="the brass lantern")


async def test_with_nothing_to_say_the_orientation_is_empty(memory_service, tmp_path):
    store, handoffs = await memory_service.store(), await memory_service.handoffs()
    sessions = await memory_service.sessions()
    providers = [
        context_files(tmp_path / "missing", tmp_path),
        latest_letter(handoffs),
        capsules(sessions),
        memories(store),
    ]
    assert await orientation(providers, WINDOW) == ""
    assert await orientation([], WINDOW) == ""


async def test_a_namespace_with_no_memories_is_oriented_without_embedding_the_topic(memory_service):
    """The first turn on fresh data waited for the embedding model (still loading) to search an empty
    namespace, and was left without its orientation past the deadline ("memories took more than 1.5 s")."""
    store = await memory_service.store()
    await store.store("The brass lantern is in the living room.", namespace="elsewhere")

    class Counted:
        model, dim, calls = store.embedder.model, store.embedder.dim, 0

        async def embed(self, texts):
            Counted.calls += 1
            return await inner.embed(texts)

    inner, store.embedder = store.embedder, Counted()
    assert await memories(store)(WINDOW) is None
    assert Counted.calls == 0
    assert "brass lantern" in (await memories(store)(Window("elsewhere", "s1", None, topic="the lamp"))).text
    assert Counted.calls == 1


async def test_every_section_comes_from_its_provider_in_order(memory_service, tmp_path):
    store, handoffs = await memory_service.store(), await memory_service.handoffs()
    sessions = await memory_service.sessions()
    (tmp_path / "identity.md").write_text("---\nautoload: all\n---\nYou are the house's assistant.\n")
    (tmp_path / "maps.md").write_text("---\nautoload: when\nwhen: maps, Zork's rooms\n---\nWest of House...\n")
    (tmp_path / "never.md").write_text("---\nautoload: never\n---\nSecret.\n")
    (tmp_path / "plain.md").write_text("No front matter at all.\n")
    (tmp_path / "broken.md").write_text("---\nautoload: [unclosed\n---\nx\n")
    await store.store("The brass lantern is in the living room.", namespace="chat")
    await handoffs.write("We mapped the cellar.", ["Open the trap door"], ["The troll wants the sword."], "chat", None)
    await sessions.put_capsule("chat", "earlier today", 1, "We talked about the lantern.")
    text = await orientation(
        [
            context_files(tmp_path),
            here_and_now("frobozz chat"),
            latest_letter(handoffs),
            capsules(sessions),
            memories(store),
        ],
        WINDOW,
    )
    titles = [line for line in text.splitlines() if line.startswith("## ")]
    assert titles[:3] == ["## Context", "## Here and now", titles[2]] and titles[2].startswith("## Hand-off letter")
    assert titles[3:] == ["## Recently", "## Memories"]
    assert "You are the house's assistant." in text and "read it when these come up: maps, Zork's rooms" in text
    assert "West of House" not in text and "Secret" not in text and "No front matter" not in text
    assert "Client: frobozz chat." in text and datetime.now().astimezone().strftime("%A") in text
    assert "Open the trap door" in text and "The troll wants the sword." in text
    assert "earlier today: We talked about the lantern." in text
    assert "The brass lantern is in the living room." in text


async def test_a_letter_already_seen_in_the_last_window_is_not_shown_again(memory_service):
    handoffs = await memory_service.handoffs()
    await handoffs.write("Old news.", None, None, "chat", None)
    later = Window("chat", "s1", previous_start=datetime.now(UTC) + timedelta(seconds=1))
    assert await latest_letter(handoffs)(later) is None
    assert (await latest_letter(handoffs)(WINDOW)).text == "Old news."


async def test_a_failing_or_slow_provider_is_left_out_with_a_log_line_and_the_rest_still_comes(caplog):
    async def broken(window):
        raise RuntimeError("the database is away")

    async def slow(window):
        await anyio.sleep(60)
        return Section("Slow", "never")

    async def fine(window):
        return Section("Fine", f"namespace {window.namespace}")

    with anyio.fail_after(10), caplog.at_level(logging.WARNING, logger="frobozz.loop"):
        text = await orientation([broken, slow, fine], WINDOW, deadline=0.2)
    assert text == "# Orientation\n\n## Fine\nnamespace chat"
    assert "broken failed and is left out (RuntimeError: the database is away)" in caplog.text
    assert "slow took more than 0.2 s" in caplog.text
