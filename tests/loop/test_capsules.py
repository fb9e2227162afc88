"""Capsules: the sidecar's summaries of earlier conversation, written again only when it moved on."""

import logging

import pytest

from frobozz.loop import refresh_capsules
from tests.loop import answering, leaving_out

pytestmark = pytest.mark.anyio


async def test_no_earlier_conversation_means_no_capsule_and_no_question(sessions):
    current = await sessions.open("chat")
    ask, prompts = answering("never asked")
    assert await refresh_capsules(sessions, "chat", current.id, ask) == [] and prompts == []
    await sessions.archive(current.id, 1, "user", "Only the current session speaks.")
    assert await refresh_capsules(sessions, "chat", current.id, ask) == [] and prompts == []


async def test_the_last_session_and_earlier_today_are_summarised_once_until_more_is_said(sessions, caplog):
    earlier = await sessions.open("chat")
    await sessions.archive(earlier.id, 1, "user", "My sister Ana moved to Porto.")
    await sessions.archive(earlier.id, 1, "tool_use", "cortex.store {...}")
    await sessions.archive(earlier.id, 1, "assistant", "How exciting for her!")
    current = await sessions.open("chat")
    ask, prompts = answering("We talked about Ana's move to Porto.")
    written = await refresh_capsules(sessions, "chat", current.id, ask)
    assert sorted(c.period for c in written) == ["earlier today", "the last session"] and len(prompts) == 2
    assert "User: My sister Ana moved to Porto.\nAssistant: How exciting for her!" in prompts[0]
    assert "cortex.store" not in prompts[0]
    await refresh_capsules(sessions, "chat", current.id, ask)
    assert len(prompts) == 2  # nothing new was said: the cached capsules stand

    await sessions.archive(earlier.id, 2, "user", "She starts teaching cello in May.")

    async def broken(prompt):
        raise RuntimeError("the sidecar's claude stopped")

    with caplog.at_level(logging.WARNING, logger="frobozz.loop"):
        assert await refresh_capsules(sessions, "chat", current.id, broken) == []
    assert "the sidecar's claude stopped" in caplog.text
    assert (await sessions.capsule("chat", "the last session")).summary == "We talked about Ana's move to Porto."
    ask, prompts = answering("Ana moved to Porto and teaches cello from May.")
    await refresh_capsules(sessions, "chat", current.id, ask)
    assert (await sessions.capsule("chat", "the last session")).summary.endswith("from May.") and len(prompts) == 2


async def test_each_database_step_goes_through_the_guard_and_one_left_out_ends_the_refresh(sessions, caplog):
    earlier = await sessions.open("chat")
    await sessions.archive(earlier.id, 1, "user", "My sister Ana moved to Porto.")
    await sessions.archive(earlier.id, 1, "assistant", "How exciting for her!")
    current = await sessions.open("chat")
    ask, prompts = answering("We talked about Ana's move to Porto.")
    step, given = leaving_out("writing a capsule")
    with caplog.at_level(logging.INFO, logger="frobozz.loop"):
        assert await refresh_capsules(sessions, "chat", current.id, ask, step=step) == []
    # the first capsule's writing left out: the second period's not looked up, nor summarised
    assert given == ["the sessions", "searching the archive", "a transcript", "a capsule", "writing a capsule"]
    assert len(prompts) == 1 and "capsules:" not in caplog.text  # the guard says why
    assert await sessions.capsule("chat", "earlier today") is None
