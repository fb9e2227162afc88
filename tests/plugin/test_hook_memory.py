"""The hooks' memory in the daemon, called directly (no claude, no hook command): what a prompt waits on."""

from __future__ import annotations

import anyio
import pytest

from frobozz.memory import DatabaseError, MemoryService, MemorySettings
from frobozz.plugin import HookMemory
from tests.black_hole import BlackHole
from tests.memory_parts import PartsStarted
from tests.waiting import eventually

from .conftest import CAT

pytestmark = pytest.mark.anyio


def prompt(text: str) -> dict[str, str]:
    return {"session_id": "s-1", "cwd": "", "prompt": text}


async def test_with_the_database_hung_one_prompt_goes_without_the_next_start_nothing_and_memory_comes_back(
    cortex_settings, embedder_ready, caplog, monkeypatch
):
    """A database that accepts and never answers, mid-session: every prompt waited out the archive (unbounded, up to
    the hook's limit), recall and the nudge. Now the first prompt finds it silent and memory is off (said once); the
    next is refused at once (the daemon lets it through, saying the database cannot be reached) with no part started,
    until a probe finds the database answering again."""
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            store = await service.store()
            await store.store(CAT, namespace="myproject")
            await store.embedder.embed(["warming up"])
            hooks = HookMemory(service, deadline=2.0)
            assert await hooks.handle("UserPromptSubmit", prompt("hello"), "myproject") == ""  # the session adopted
            caplog.clear()  # (what the answering database's prompt said is not this test's)
            parts = PartsStarted(monkeypatch)
            hole.hang()
            with anyio.fail_after(60):
                first = await hooks.handle("UserPromptSubmit", prompt("What is my cat called?"), "myproject")
            hung, turned_off = parts.since(0), parts.mark()
            with anyio.fail_after(60), pytest.raises(DatabaseError, match="memory is off"):
                await hooks.handle("UserPromptSubmit", prompt("What is my cat called?"), "myproject")
            off = parts.since(turned_off)
            hole.answer()
            with anyio.fail_after(30):
                await eventually(service.answering_now)  # a probe, due every few seconds, finds it back
            back = parts.mark()
            third = await hooks.handle("UserPromptSubmit", prompt("What is my cat called?"), "myproject")
            on = parts.since(back)
        finally:
            await service.aclose()
    assert first == ""  # the prompt went without memory
    assert caplog.text.count("memory is off: the database does not answer (archiving the prompt: slower than") == 1
    assert hung == ["archiving: user"] and off == []  # the archive waited its bound; recall and the nudge did not
    assert "was left out" not in caplog.text  # the one line says it
    assert CAT in third and on == ["archiving: user", "recall", "the nudge"]
