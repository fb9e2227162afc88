"""Sessions that outlive the machine, through the real claude CLI against a scripted Messages API: the
transcript is mirrored into a session store, and a machine that never saw the session (a fresh HOME)
resumes it, or forks it, from the store alone. A store that fails or stalls never holds up an event."""

import json
from pathlib import Path

import anyio
import pytest
from claude_agent_sdk.testing import run_session_store_conformance

from frobozz._scratch import sweep_orphans
from frobozz.engine import Engine, EngineError, MirrorError, Result, copy_sign_in, project_key, transcript_path
from frobozz.engine._session_store import key_for_path
from frobozz.engine.testing import InMemorySessionStore, ScriptedModel, replies
from tests.engine.conftest import until

pytestmark = pytest.mark.anyio


def machine(tmp_path: Path, name: str) -> Path:
    """A HOME of its own, as another machine has: no claude transcripts in it."""
    home = tmp_path / name
    home.mkdir()
    return home


async def one_turn(engine: Engine, text: str, *, resume: str | None = None) -> list:
    await engine.start(resume)
    await engine.send(text)
    return await until(engine.events(), Result)


async def test_the_reference_store_meets_the_official_sdks_conformance_suite():
    await run_session_store_conformance(InMemorySessionStore)


def test_a_transcripts_path_names_its_key_and_one_outside_names_none(tmp_path):
    projects = tmp_path / "projects"
    assert key_for_path(str(projects / "-w" / "abc.jsonl"), projects) == {"project_key": "-w", "session_id": "abc"}
    assert key_for_path(str(projects / "-w" / "abc" / "subagents" / "agent-1.jsonl"), projects, "mine") == {
        "project_key": "mine",
        "session_id": "abc",
        "subpath": "subagents/agent-1",
    }
    for outside in (tmp_path / "elsewhere" / "abc.jsonl", projects / "abc.jsonl", projects / "-w" / "abc.txt"):
        assert key_for_path(str(outside), projects) is None
    long = "/" + "d" * 300
    assert len(project_key(long)) > 200 and project_key(long) != project_key(long + "e")  # cut, then a hash


def test_a_sign_in_copy_mirrors_its_source_each_time_and_is_never_written_through_a_link(tmp_path):
    """A copy made earlier does not outlive its source (a settings file whose hook blocked every prompt, removed
    by its user, stayed in the copy), a change made to the copy is undone, and a link the copy's account planted
    in it is replaced, not written through (the service copying as root would write wherever it points)."""
    source, target = tmp_path / "operator", tmp_path / "tenant"
    source.mkdir()
    target.mkdir()
    env = {"CLAUDE_CONFIG_DIR": str(source), "HOME": str(tmp_path)}
    (source / "settings.json").write_text('{"hooks": {"UserPromptSubmit": []}}')
    (source / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    oauth = {"accessToken": "at", "refreshToken": "rt"}
    (source / ".credentials.json").write_text(json.dumps({"claudeAiOauth": oauth}))
    copy_sign_in(env, target)
    assert json.loads((target / ".credentials.json").read_text()) == {"claudeAiOauth": {"accessToken": "at"}}
    (target / "settings.json").write_text('{"changed": "by the copy\'s claude"}')
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("untouched")
    (target / ".claude.json").unlink()
    (target / ".claude.json").symlink_to(elsewhere)
    copy_sign_in(env, target)
    assert (target / "settings.json").read_text() == '{"hooks": {"UserPromptSubmit": []}}'
    assert elsewhere.read_text() == "untouched" and not (target / ".claude.json").is_symlink()
    assert (target / ".claude.json").read_text() == '{"hasCompletedOnboarding": true}'
    (source / "settings.json").unlink()
    (source / ".credentials.json").unlink()
    copy_sign_in(env, target)
    assert sorted(p.name for p in target.iterdir()) == [".claude.json"]


async def test_a_session_mirrored_on_one_machine_resumes_from_the_store_on_another(make_options, tmp_path):
    store = InMemorySessionStore()
    async with ScriptedModel(replies("the lamp is in the attic", "yes: the attic")) as model:
        first_home = machine(tmp_path, "first")
        async with Engine(
            make_options(model, env={"HOME": str(first_home)}, session_store=store, session_project="zork")
        ) as engine:
            session = (await one_turn(engine, "where is the lamp?"))[-1].session_id
        stored = await store.load({"project_key": "zork", "session_id": session})
        assert stored and any(e.get("type") == "user" for e in stored)

        second_home = machine(tmp_path, "second")
        options = make_options(model, env={"HOME": str(second_home)}, session_store=store, session_project="zork")
        async with Engine(options) as engine:
            events = await one_turn(engine, "remind me where", resume=session)
            private = Path(engine.env["CLAUDE_CONFIG_DIR"])
            assert private.is_dir() and not (second_home / ".claude" / "projects").exists()
            assert private not in sweep_orphans("frobozz-claude-")  # its engine lives: kept (a killed one's goes)
        assert not private.exists()  # the private config directory goes with the engine
    replayed = [e for e in events if e.is_replay]
    assert replayed and events[-1].session_id == session
    assert "where is the lamp?" in str(model.requests[1].body["messages"])  # the model had the history
    after = await store.load({"project_key": "zork", "session_id": session})
    assert len(after) > len(stored) and "remind me where" in str(after)  # and mirroring went on


async def test_a_forked_session_resumes_from_the_store_under_a_new_id_with_the_history(make_options, tmp_path):
    store = InMemorySessionStore()
    async with ScriptedModel(replies("north of the house", "still north", "the fork's answer")) as model:
        async with Engine(
            make_options(model, env={"HOME": str(machine(tmp_path, "a"))}, session_store=store, session_project="p")
        ) as engine:
            session = (await one_turn(engine, "where am I?"))[-1].session_id
        async with Engine(
            make_options(
                model,
                env={"HOME": str(machine(tmp_path, "b"))},
                session_store=store,
                session_project="p",
                fork_session=True,
            )
        ) as engine:
            forked = (await one_turn(engine, "and now?", resume=session))[-1].session_id
        async with Engine(
            make_options(
                model,
                env={"HOME": str(machine(tmp_path, "c"))},
                session_store=store,
                session_project="p",
                continue_conversation=True,
            )
        ) as engine:
            continued = (await one_turn(engine, "and after that?"))[-1].session_id
    assert forked != session and "where am I?" in str(model.requests[1].body["messages"])
    assert await store.load({"project_key": "p", "session_id": forked})
    assert continued == forked and "and now?" in str(model.requests[2].body["messages"])  # the latest: the fork


async def test_a_session_neither_here_nor_in_the_store_is_a_clear_error(make_options, tmp_path):
    async with ScriptedModel(replies("never")) as model:
        async with Engine(make_options(model, session_store=InMemorySessionStore())) as engine:
            with pytest.raises(EngineError, match="here or in the session store"):
                await engine.start("0b6d7a3e-58a5-4f1e-9d38-000000000000")
        async with Engine(make_options(model, session_store=InMemorySessionStore())) as engine:
            with pytest.raises(EngineError, match="not a session id"):
                await engine.start("../../etc/passwd")
        store = InMemorySessionStore()
        store.fail = True
        async with Engine(make_options(model, session_store=store)) as engine:
            with pytest.raises(EngineError, match=r"the session store failed load.*down"):
                await engine.start("0b6d7a3e-58a5-4f1e-9d38-000000000000")


@pytest.mark.parametrize("trouble", ["fail", "stall"])
async def test_a_store_that_fails_or_stalls_never_delays_an_event_and_the_gap_is_reported(
    make_options, claude_home, trouble
):
    store = InMemorySessionStore()
    setattr(store, trouble, True)
    async with ScriptedModel(replies("first", "second")) as model:
        options = make_options(model, session_store=store, session_store_flush="eager", session_store_timeout=3)
        async with Engine(options) as engine:
            events = await one_turn(engine, "one")
            if trouble == "stall":
                assert store.stalled  # the turn's events came while the store still hung on an append
            await engine.send("two")
            events += await until(engine.events(), Result)
            with anyio.fail_after(30):
                async for event in engine.events():
                    events.append(event)
                    if isinstance(event, MirrorError):
                        break
    session = engine.session_id
    errors = [e for e in events if isinstance(e, MirrorError)]
    assert errors[0].session_id == session and errors[0].source == "session_store"
    assert ("down" if trouble == "fail" else "did not answer within 3 s") in errors[0].message
    assert [e.result for e in events if isinstance(e, Result)] == ["first", "second"] and store.appends == 0
    assert transcript_path(session, claude_home, options.env).is_file()  # claude's own copy is whole


async def test_what_a_failing_store_missed_is_written_first_once_it_is_back_and_the_copy_is_whole(
    make_options, claude_home
):
    """A database away for a turn left a hole in the stored transcript ("N entries were not stored"): a session
    resumed on another machine lost that turn. What the store surely did not take is now held, then written
    first, in order."""
    import json

    store = InMemorySessionStore()
    store.fail = True
    async with ScriptedModel(replies("first", "second")) as model:
        options = make_options(model, session_store=store, session_store_flush="eager", session_project="zork")
        async with Engine(options) as engine:
            events = await one_turn(engine, "one")
            with anyio.fail_after(30):
                async for event in engine.events():
                    if isinstance(event, MirrorError):
                        break
            assert engine._store.mirror is not None and engine._store.mirror.held
            store.fail = False
            await engine.send("two")
            events += await until(engine.events(), Result)
    session = engine.session_id
    local = [json.loads(line) for line in transcript_path(session, claude_home, options.env).read_text().splitlines()]
    stored = await store.load({"project_key": "zork", "session_id": session})
    assert stored is not None
    assert [e["uuid"] for e in stored if e.get("uuid")] == [e["uuid"] for e in local if e.get("uuid")]
    assert str(stored).index("'one'") < str(stored).index("'two'")
