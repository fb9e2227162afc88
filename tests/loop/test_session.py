"""The memory loop around a real claude CLI: the scripted model answers as primary and as sidecar."""

import threading

import anyio
import pytest

from frobozz.engine import CompactBoundary, Result, is_compaction_request
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from frobozz.loop import MemorySession, context_files, here_and_now, latest_letter, memories
from frobozz.memory import LoopSessionStore, MemoryStore
from tests.black_hole import BlackHole
from tests.conftest import hub_servers
from tests.engine.conftest import of, until
from tests.memory_parts import PARTS, PartsStarted
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
SISTER = "The user's sister Ana lives in Porto and teaches the cello."
IDENTITY = "You are the household's long-lived assistant."


def script(request):
    """The sidecar's three questions, the compaction, and otherwise an echo."""
    text = request.last_user_text()
    if text.startswith("Write up to"):
        return "Ana the sister\ncello lessons"
    if text.startswith("Here is the last exchange"):
        return "The user is learning the cello." if "learning the cello" in text else "NONE"
    if text.startswith("A stored memory"):  # does a new fact change a stored one? (suggest)
        return "KEEP"
    if is_compaction_request(request.body):
        return "Summary: we talked about Ana."
    return f"echo: {text.splitlines()[-1]}"


def primary_messages(model):
    """What the primary was sent (its requests carry tools; the sidecar's are the same CLI too, so
    the sidecar's prompts are told apart by their text)."""
    return [
        r.last_user_text()
        for r in model.requests
        if not r.last_user_text().startswith(
            ("Write up to", "Here is the last exchange", "Summarise", "A stored memory")
        )
    ]


def providers(folder):
    def make(store, sessions, handoffs):
        return [context_files(folder), here_and_now("test client"), latest_letter(handoffs), memories(store, sessions)]

    return make


async def test_orientation_recall_and_suggestions_around_each_turn_and_again_after_a_compaction(
    make_options, memory_service, tmp_path
):
    store = await memory_service.store()
    await store.store(SISTER, namespace="chat")
    (tmp_path / "who.md").write_text("---\nautoload: all\n---\nYou help the user remember things.\n")
    async with ScriptedModel(script) as model:
        options = make_options(model, system_prompt=IDENTITY)
        async with MemorySession(
            options, memory_service, namespace="chat", sidecar=make_options(model), providers=providers(tmp_path)
        ) as loop:
            assert loop.pool.sidecar.warm == 2  # recall's question and the last turn's suggestions each find one
            await loop.send("What does my sister Ana teach?")
            await until(loop.events(), Result)
            await loop.send("I am learning the cello myself now.")
            await until(loop.events(), Result)
            with anyio.fail_after(60):
                await loop.handled(2)  # the loop saw the turn end: its suggestions are under way
                await loop.settled()
            await loop.send("Any tips?")
            await until(loop.events(), Result)
            await loop.pool.primary.send("/compact")
            events = await until(loop.events(), Result)
            await loop.send("Where does Ana live?")
            await until(loop.events(), Result)
    sent = primary_messages(model)
    first, second, third, after = sent[0], sent[1], sent[2], sent[-1]
    assert first.startswith("# Orientation") and "You help the user remember things." in first
    assert "Client: test client." in first and first.count(SISTER) == 1  # in the orientation, so not recalled too
    assert "# Orientation" not in second and SISTER not in second  # shown once, not again
    assert "<memory-nudge>" in third and "The user is learning the cello." in third
    assert of(events, CompactBoundary) and "# Orientation" in after and after.endswith("Where does Ana live?")
    window = [r for r in model.requests if "# Orientation" in r.last_user_text()][-1]
    raw = "".join(block.get("text", "") for block in window.last_user_blocks())
    assert raw.index("# Orientation") > raw.index("<local-command")  # the new window's first message
    turns = [r for r in model.requests if r.last_user_text() in sent]
    assert len(turns) == 5 and all(IDENTITY in r.system for r in turns)  # the same identity, before and after
    entries = await (await memory_service.sessions()).transcript(loop.id)
    assert [e.content for e in entries if e.kind == "user"] == [
        "What does my sister Ana teach?",
        "I am learning the cello myself now.",
        "Any tips?",
        "Where does Ana live?",
    ]


async def test_without_recall_or_a_namespace_with_memories_the_message_is_the_orientation_and_the_text(
    make_options, memory_service, tmp_path
):
    async with ScriptedModel(script) as model:
        options = make_options(model)
        async with MemorySession(
            options,
            memory_service,
            namespace="empty",
            sidecar=options,
            recall=False,
            suggest=False,
            providers=providers(tmp_path / "none"),
        ) as loop:
            assert loop.pool.sidecar.warm == 1  # recall asks no question: one warm sidecar claude, not two
            await loop.send("hello")
            await until(loop.events(), Result)
            await loop.send("again")
            await until(loop.events(), Result)
    sent = primary_messages(model)
    assert sent[0].startswith("# Orientation\n\n## Here and now") and sent[0].endswith("hello")
    assert sent[1] == "again"


LOCKER = "The user's locker code is 4417."


def only_here_and_now(store, sessions, handoffs):
    """No memories in the orientation: what the first message holds of memory, recall put there."""
    return [here_and_now("test client")]


async def test_a_memory_the_model_stores_in_one_session_is_recalled_in_a_later_one_once_and_not_when_unrelated(
    make_options, memory_service, frobozz_env, cortex_settings
):
    def storing(request):
        text = request.last_user_text()
        if request.tool_results():
            return "Stored."
        if text.endswith("remember it.") and not text.startswith(("Write up to", "Here is the last exchange")):
            return Reply((ToolUse("mcp__cortex__store", {"content": LOCKER}),))
        return script(request)

    async with ScriptedModel(storing) as model:
        cortex = hub_servers(["cortex"], frobozz_env, cortex_settings, FROBOZZ_CORTEX_DEFAULT_NAMESPACE="chat")
        options = make_options(model, mcp_config=cortex, strict_mcp_config=True, allowed_tools=["mcp__cortex"])
        async with MemorySession(
            options, memory_service, namespace="chat", sidecar=make_options(model), providers=only_here_and_now
        ) as first:
            await first.pool.primary.wait_for_mcp({"cortex"})
            await first.send("My locker code is 4417, remember it.")
            await until(first.events(), Result)
        model.requests.clear()
        async with MemorySession(
            make_options(model),
            memory_service,
            namespace="chat",
            sidecar=make_options(model),
            providers=only_here_and_now,
        ) as later:
            for text in ("What is my locker code?", "Tell me my locker code again.", "How do I bake sourdough bread?"):
                await later.send(text)
                await until(later.events(), Result)
    [stored] = await (await memory_service.store()).recent(5, "chat")
    assert (stored.content, stored.source) == (LOCKER, "mcp")  # stored by the model, through the cortex server
    asked, again, unrelated = primary_messages(model)
    assert "<recalled-memories>" in asked and f"[memory {stored.id}, " in asked and LOCKER in asked
    assert LOCKER not in again and "<recalled-memories>" not in unrelated  # shown once; nothing for the unrelated


async def test_sessions_share_a_sidecar_kept_warm_by_their_caller_and_one_closed_once_its_turn_is_handled_suggests(
    make_options, memory_service
):
    """A caller firing sessions one after another (the routines' worker) keeps the sidecar claudes: no session
    starts or closes them. Closing a session right after its Result, once `handled` says the loop saw the turn
    end, still asks the turn's suggestions (the loop's observer sees the Result on a task of its own)."""
    from frobozz.engine import Sidecar

    async with ScriptedModel(script) as model:
        sidecar = Sidecar(make_options(model), warm=1)  # one is enough for sessions one after another
        async with anyio.create_task_group() as tg:
            tg.start_soon(sidecar.keep_warm)
            for text in ("I am learning the cello myself now.", "And the piano."):
                async with MemorySession(
                    make_options(model),
                    memory_service,
                    namespace="chat",
                    providers=only_here_and_now,
                    shared_sidecar=sidecar,
                ) as loop:
                    await loop.send(text)
                    await until(loop.events(), Result)
                    with anyio.fail_after(60):
                        await loop.handled(1)
                assert loop.turns_handled == 1 and loop.pool.sidecar is sidecar
            closed, answered = sidecar._closed, sidecar.answered
            sidecar.close()
            tg.cancel_scope.cancel()
    suggested = [r for r in model.requests if r.last_user_text().startswith("Here is the last exchange")]
    assert len(suggested) == 2
    assert "cello" in suggested[0].last_user_text() and "piano" in suggested[1].last_user_text()
    assert not closed and answered >= 2  # the caller's: no session closed it, and it answered the suggestions


async def test_a_slow_sidecar_does_not_hold_the_turn_past_the_recall_deadline(make_options, memory_service):
    def slow_queries(request):
        if request.last_user_text().startswith("Write up to"):
            return Reply((Text("the cello " * 200),), delay=0.5)  # 50 pieces, half a second each
        return script(request)

    await (await memory_service.store()).store(SISTER, namespace="chat")
    async with ScriptedModel(slow_queries) as model:
        async with MemorySession(
            make_options(model),
            memory_service,
            namespace="chat",
            sidecar=make_options(model),
            providers=only_here_and_now,
            deadline=4.0,  # time enough for the message's own search on a loaded machine (1 s was not, at load 8)
        ) as loop:
            with anyio.fail_after(10):  # the sidecar would take 25 s
                await loop.send("What does my sister Ana teach?")
            await until(loop.events(), Result)
    [sent] = primary_messages(model)
    assert SISTER in sent  # the message's own search made the deadline; the sidecar's queries did not
    assert any(r.last_user_text().startswith("Write up to") for r in model.requests)


async def test_with_the_database_away_the_turn_still_goes_and_the_archive_takes_up_again_when_it_is_back(
    make_options, frobozz_env, tmp_path, caplog
):
    import pgserver

    from frobozz.memory import MemoryService, MemorySettings

    server = pgserver.get_server(tmp_path / "pg-flaky", cleanup_mode="stop")
    service = MemoryService(MemorySettings(database_url=server.get_uri()))
    try:
        async with ScriptedModel(script) as model:
            async with MemorySession(
                make_options(model),
                service,
                namespace="chat",
                sidecar=make_options(model),
                providers=only_here_and_now,
                suggest=False,
            ) as loop:
                await loop.send("before the outage")
                await until(loop.events(), Result)
                server.cleanup()  # the database stops
                with anyio.fail_after(30):
                    await loop.send("during the outage")
                    during = await until(loop.events(), Result)
                server = pgserver.get_server(tmp_path / "pg-flaky", cleanup_mode="stop")  # and comes back
                with anyio.fail_after(30):
                    await eventually(lambda: service.answering)  # a probe in the background finds it so
                await loop.send("after the outage")
                await until(loop.events(), Result)
        entries = await (await service.sessions()).transcript(loop.id)
    finally:
        await service.aclose()
        server.cleanup()
    assert of(during, Result)[0].result == "echo: during the outage"  # memory is help, never a gate
    assert caplog.text.count("memory is off: the database does not answer (the nudge: ") == 1
    assert caplog.text.count("memory is back on") == 1
    assert [e.content for e in entries if e.kind == "user"] == ["before the outage", "after the outage"]
    assert [e.turn for e in entries if e.kind == "user"] == [1, 3]  # nothing written before was lost


async def test_with_the_database_hung_one_turn_waits_once_the_next_not_at_all_and_memory_comes_back(
    make_options, cortex_settings, tmp_path, caplog, monkeypatch
):
    """A database that accepts and never answers: each turn waited out the nudge, recall and the archive one after
    the other, 14 s a turn. Now one turn finds it silent (the nudge's bound and a probe), memory is off, said once,
    and until a probe finds it answering again no part of a turn, nor of a new window's orientation, is started;
    what cortex's tools ask of the service is refused at once."""
    from frobozz.memory import DatabaseError, MemoryService, MemorySettings

    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            await (await service.store()).store(SISTER, namespace="chat")  # recall has something to search
            async with ScriptedModel(script) as model:
                async with MemorySession(
                    make_options(model),
                    service,
                    namespace="chat",
                    sidecar=make_options(model),
                    providers=providers(tmp_path),
                ) as loop:
                    await loop.send("before")
                    await until(loop.events(), Result)
                    parts = PartsStarted(monkeypatch)
                    hole.hang()
                    for line in ("one", "two", "three"):
                        with anyio.fail_after(60):
                            await loop.send(line)
                        await until(loop.events(), Result)
                    await loop.pool.primary.send("/compact")  # a new window: its orientation, memory off
                    await until(loop.events(), Result)
                    await loop.send("a new window")
                    await until(loop.events(), Result)
                    hung = parts.since(0)
                    with anyio.fail_after(5), pytest.raises(DatabaseError, match="memory is off"):
                        await service.store()  # as cortex's tools ask for it: nothing waits on the database
                    hole.answer()
                    with anyio.fail_after(30):
                        await eventually(lambda: service.answering)  # a probe in the background found it so
                    back = parts.mark()
                    await loop.send("after")
                    await until(loop.events(), Result)
                    after = parts.since(back)
            entries = await (await service.sessions()).transcript(loop.id)
        finally:
            await service.aclose()
    assert hung == ["the nudge"]  # the first hung turn's, which waited its bound: recall and the archive not after it
    assert after == ["the nudge", "recall", "archiving: user"]  # memory is back: each part goes again
    assert caplog.text.count("memory is off: the database does not answer (the nudge: slower than") == 1
    assert "and is left out" not in caplog.text  # no orientation provider waited its deadline either
    assert caplog.text.count("memory is back on") == 1
    assert "was left out" not in caplog.text  # no part's own line: the one line says it
    assert [e.content for e in entries if e.kind == "user"] == ["before", "after"]  # nothing written was lost
    assert "echo: before" in [e.content for e in entries if e.kind == "assistant"]


# the loop's background work, each part named as its guard names it (and the turns' parts: none starts, no turn is sent)
BACKGROUND = {
    **PARTS,
    "the stored memory to compare with": (MemoryStore, "search"),
    "suggesting": (LoopSessionStore, "suggest"),
    "the sessions": (LoopSessionStore, "list"),
    "searching the archive": (LoopSessionStore, "search_archive"),
    "a transcript": (LoopSessionStore, "transcript"),
    "a capsule": (LoopSessionStore, "capsule"),
    "writing a capsule": (LoopSessionStore, "put_capsule"),
}
HUNG_AT = {  # the sidecar's question the database hangs behind (its answer held until then), and the part that waits
    "suggestions": ("Here is the last exchange", "the stored memory to compare with"),
    "capsules": ("Summarise", "writing a capsule"),
}


@pytest.mark.parametrize("work", HUNG_AT)
async def test_with_the_database_hung_under_background_work_one_step_waits_its_bound_memory_goes_off_and_it_ends(
    work, make_options, cortex_settings, caplog, monkeypatch
):
    """A database that hangs while the sidecar answers for the loop's background work (the suggestions from a turn,
    the capsules of earlier conversation): each of its steps after the answer waited on the database for ever (and
    a chat's end waited for them). Now the first step waits its bound, a probe finds the database silent too,
    memory is off (said once, naming that step), and the work ends there: no step after it starts."""
    from frobozz.memory import MemoryService, MemorySettings

    question, part = HUNG_AT[work]
    asked, release = threading.Event(), threading.Event()

    def held(request):
        if request.last_user_text().startswith(question):
            asked.set()
            release.wait(30)
            return "The user is learning the cello." if work == "suggestions" else "We talked about Ana."
        return script(request)

    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        service = MemoryService(MemorySettings(database_url=hole.url))
        try:
            sessions = await service.sessions()
            if work == "capsules":  # an earlier conversation for them to sum up
                earlier = await sessions.open("chat")
                await sessions.archive(earlier.id, 1, "user", "My sister Ana moved to Porto.")
                await sessions.archive(earlier.id, 1, "assistant", "How exciting for her!")
            async with ScriptedModel(held) as model:
                async with MemorySession(
                    make_options(model),
                    service,
                    namespace="chat",
                    sidecar=make_options(model),
                    providers=only_here_and_now,
                    recall=False,
                    suggest=work == "suggestions",
                ) as loop:
                    if work == "suggestions":
                        await loop.send("I am learning the cello myself now.")
                        await until(loop.events(), Result)

                    async def archived() -> bool:  # the turn's entries all written: no write left to meet the hang
                        return (await sessions.get(loop.id)).claude_session_id is not None

                    with anyio.fail_after(60):
                        await eventually(asked.is_set)
                        if work == "suggestions":
                            await eventually(archived)
                    caplog.clear()
                    parts = PartsStarted(monkeypatch, BACKGROUND)
                    hole.hang()
                    release.set()  # the sidecar answers: the work goes on to the database
                    with anyio.fail_after(30):
                        await loop.settled()
                    started, answering = parts.since(0), service.answering
        finally:
            release.set()
            await service.aclose()
    assert started == [part]  # the step that waited its bound: none after it
    assert not answering  # memory is off
    assert caplog.text.count(f"memory is off: the database does not answer ({part}: slower than") == 1
    assert "was left out" not in caplog.text and "not read" not in caplog.text  # the one line says it
    assert "background work failed" not in caplog.text
