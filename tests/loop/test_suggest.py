"""Suggest: facts from the last exchange wait in the buffer and come back as one nudge."""

import logging

import pytest

from frobozz.loop._suggest import Suggester, nudge_blocks
from tests.loop import answering, leaving_out

pytestmark = pytest.mark.anyio


async def test_no_facts_means_no_nudge(sessions):
    session = await sessions.open("chat")

    async def nothing(prompt):
        return "NONE."

    assert await Suggester(sessions, nothing)(session.id, "hi", "hello!") == []
    assert await nudge_blocks(sessions, session.id) == []


async def test_proposed_facts_wait_for_the_next_turn_and_go_once_cleared(sessions):
    session = await sessions.open("chat")
    sidecar, prompts = answering(
        "- The user's sister is called Ana.\n- Ana lives in Porto.\n\n- Ana teaches cello.\n- One too many."
    )

    facts = await Suggester(sessions, sidecar)(session.id, "My sister Ana moved to Porto.", "How exciting!")
    assert facts == ["The user's sister is called Ana.", "Ana lives in Porto.", "Ana teaches cello."]
    assert "User: My sister Ana moved to Porto." in prompts[0] and "Assistant: How exciting!" in prompts[0]
    [block] = await nudge_blocks(sessions, session.id)
    assert "- Ana lives in Porto." in block["text"] and "store it with cortex" in block["text"]
    await sessions.clear_suggestions(session.id)
    assert await nudge_blocks(sessions, session.id) == []


async def test_a_failing_sidecar_is_logged_and_nothing_is_buffered(sessions, caplog):
    session = await sessions.open("chat")

    async def broken(prompt):
        raise RuntimeError("the sidecar's claude stopped")

    with caplog.at_level(logging.WARNING, logger="frobozz.loop"):
        assert await Suggester(sessions, broken)(session.id, "hi", "hello") == []
    assert "the sidecar's claude stopped" in caplog.text and await sessions.suggestions(session.id) == []


async def test_a_fact_that_changes_a_stored_memory_is_proposed_as_a_supersede_when_the_sidecar_says_so(sessions):
    session = await sessions.open("chat")
    old, _ = await sessions.memories.store("Ana lives in Porto.", namespace="chat")
    await sessions.memories.store("The user's bike is red.", namespace="chat")
    prompts = []

    async def sidecar(prompt):
        prompts.append(prompt)
        if prompt.startswith("A stored memory"):  # Ana moved; the bike is another fact
            return "REPLACES" if "Stored: Ana" in prompt else "KEEP"
        return "- Ana lives in Lisbon now.\n- The user's bike is blue and red.\n- The user plays chess."

    facts = await Suggester(sessions, sidecar)(session.id, "Ana moved to Lisbon.", "Noted!", namespace="chat")
    asked = [p for p in prompts if p.startswith("A stored memory")]
    assert any("Stored: Ana lives in Porto.\nNew: Ana lives in Lisbon now." in p for p in asked)
    assert facts[0].startswith("Ana lives in Lisbon now. (this changes memory") and f"supersede({old.id}" in facts[0]
    assert facts[1:] == ["The user's bike is blue and red.", "The user plays chess."]
    [block] = await nudge_blocks(sessions, session.id)
    assert f"supersede({old.id}, …)" in block["text"] and "or supersede the memory it changes" in block["text"]


async def test_with_nothing_stored_a_fact_is_suggested_as_before_without_asking_more(sessions):
    session = await sessions.open("chat")
    sidecar, prompts = answering("- Ana lives in Lisbon now.")
    assert await Suggester(sessions, sidecar)(session.id, "hi", "hello", namespace="chat") == [
        "Ana lives in Lisbon now."
    ]
    assert len(prompts) == 1


async def test_a_step_its_guard_leaves_out_ends_the_suggestions_with_nothing_buffered_and_no_line_of_its_own(
    sessions, caplog
):
    session = await sessions.open("chat")
    await sessions.memories.store("Ana lives in Porto.", namespace="chat")
    sidecar, prompts = answering("Ana lives in Lisbon now.\nAna teaches cello.")
    step, given = leaving_out("the stored memory to compare with")
    with caplog.at_level(logging.INFO, logger="frobozz.loop"):
        facts = await Suggester(sessions, sidecar, step=step)(session.id, "Ana moved.", "Oh!", namespace="chat")
    assert facts == [] and given == ["the stored memory to compare with"]  # not the next fact's, nor suggesting
    assert len(prompts) == 1 and await sessions.suggestions(session.id) == []
    assert "suggest:" not in caplog.text  # the guard says why


async def test_each_database_step_of_the_suggestions_goes_through_the_guard(sessions):
    session = await sessions.open("chat")
    sidecar, _ = answering("Ana teaches cello.\nAna lives in Porto.")
    step, given = leaving_out("nothing")
    facts = await Suggester(sessions, sidecar, step=step)(session.id, "Ana moved.", "Oh!", namespace="chat")
    assert given == ["the stored memory to compare with"] * 2 + ["suggesting"]
    assert await sessions.suggestions(session.id) == facts == ["Ana teaches cello.", "Ana lives in Porto."]
