"""Recall before a turn: relevant memories once each, nothing unrelated, never past the deadline."""

import logging

import anyio
import pytest

from frobozz.loop import recalled_blocks
from frobozz.memory import Recall
from tests.loop import answering

pytestmark = pytest.mark.anyio
NOTES = [
    "The user's sister Ana lives in Porto and teaches the cello.",
    "The user is allergic to peanuts.",
    "The user's car is a green 2009 Volvo estate.",
    "The user plays five-a-side football on Tuesday evenings.",
]


@pytest.fixture
async def stores(memory_service):
    store, sessions = await memory_service.store(), await memory_service.sessions()
    for note in NOTES:
        await store.store(note, namespace="chat")
    return store, sessions


async def test_nothing_is_recalled_from_an_empty_namespace_or_for_an_empty_message(stores):
    """An empty namespace asks the sidecar nothing: its queries (a claude turn) could find nothing there."""
    store, sessions = stores
    session = await sessions.open("empty")
    asked = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return "my sister's instrument"

    assert await Recall(store, sessions, ask=ask)(session.id, "empty", "What instrument does my sister teach?") == []
    assert asked == []
    assert await Recall(store, sessions)(session.id, "chat", "   ") == []
    assert recalled_blocks([]) == []


async def test_a_relevant_memory_is_recalled_once_and_an_unrelated_message_recalls_nothing(stores):
    store, sessions = stores
    session = await sessions.open("chat")
    recall = Recall(store, sessions)
    first = await recall(session.id, "chat", "Which instrument does my sister Ana teach?")
    again = await recall(session.id, "chat", "Which instrument does my sister Ana teach?")
    unrelated = await recall(session.id, "chat", "How do I compile a Rust crate for WebAssembly?")
    assert [h.memory.content for h in first][:1] == [NOTES[0]] and again == [] and unrelated == []
    resumed = await Recall(store, sessions)(session.id, "chat", "Tell me about Ana in Porto")
    assert NOTES[0] not in [h.memory.content for h in resumed]  # the seen-set outlives the Recall object
    [block] = recalled_blocks(first)
    assert f"[memory {first[0].memory.id}, {first[0].memory.created_at:%Y-%m-%d}] {NOTES[0]}" in block["text"]


async def test_the_sidecars_queries_find_what_the_message_alone_does_not(stores):
    store, sessions = stores
    session = await sessions.open("chat")
    sidecar, asked = answering("- peanut allergy\n- food the user cannot eat\n")

    plain = await Recall(store, sessions)(session.id, "chat", "Can you plan tonight's dinner menu?")
    helped = await Recall(store, sessions, ask=sidecar)(session.id, "chat", "Can you plan tonight's dinner menu?")
    assert NOTES[1] not in [h.memory.content for h in plain]
    assert NOTES[1] in [h.memory.content for h in helped] and "tonight's dinner menu" in asked[0]


async def test_a_slow_or_failing_sidecar_never_delays_the_turn_past_the_deadline(stores, caplog):
    store, sessions = stores
    session = await sessions.open("chat")

    async def slow(prompt):
        await anyio.sleep(30)
        return "never"

    async def broken(prompt):
        raise RuntimeError("the sidecar's claude stopped")

    with anyio.fail_after(10):  # the sidecar would take 30 s: recall gives up on it at its deadline
        hits = await Recall(store, sessions, ask=slow, deadline=0.8)(session.id, "chat", "What car do I drive?")
    assert [h.memory.content for h in hits] == [NOTES[2]]  # the message's own search made it in time
    with caplog.at_level(logging.WARNING, logger="frobozz.loop"):
        hits = await Recall(store, sessions, ask=broken)(session.id, "chat", "When is my football game?")
    assert [h.memory.content for h in hits] == [NOTES[3]] and "the sidecar's claude stopped" in caplog.text
