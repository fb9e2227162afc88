"""The agent's Python API through the real claude CLI, a scripted model and the real Postgres: a turn's events,
history and attachments, the workspace guard and the tool log, questions, queued messages, a restart."""

import json
from itertools import pairwise

import anyio
import asyncpg
import pytest

from frobozz.agent import (
    Done,
    Error,
    InputError,
    Question,
    QuestionError,
    SessionNotFoundError,
    Status,
    TextDelta,
    ToolResult,
    WorkspaceError,
)
from frobozz.memory import DatabaseError
from tests.conftest import python_for_any_account
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def turn(agent, session, text):
    with anyio.fail_after(60):
        return [event async for event in agent.send_message(session, text)]


async def turn_unlogged(agent, session, text):
    """A turn whose tool calls the database cannot keep."""

    async def gone(*args, **kwargs):
        raise DatabaseError("the database went away")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(agent.store, "add_tool_call", gone)
        return await turn(agent, session, text)


def turn_in(tg, agent, session, text) -> list:
    """A turn run in the task group: its events, once it has ended."""
    seen: list = []

    async def run() -> None:
        seen.extend(await turn(agent, session, text))

    tg.start_soon(run)
    return seen


async def test_with_no_session_there_is_nothing_to_list_and_an_unknown_one_is_not_found(agent):
    assert await agent.sessions() == []
    for bad in ("0" * 32, "../x", "", "x" * 1000):
        with pytest.raises(SessionNotFoundError):
            await agent.session(bad)


async def test_a_turn_streams_true_deltas_then_done_and_the_status_goes_idle_streaming_idle(agent, roots):
    session = await agent.create_session("alice/notes")
    events = await turn(agent, session, "hello there")
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    done = events[-1]
    assert isinstance(done, Done) and not done.is_error and done.usage["output_tokens"] > 0
    assert len(deltas) > 1 and "".join(deltas) == done.result  # each piece only what is new
    assert all(not later.startswith(earlier) for earlier, later in pairwise(deltas))
    states = [
        logged.event.state for logged in (await agent.session(session)).relay.log if isinstance(logged.event, Status)
    ]
    assert states == ["idle", "streaming", "idle"]
    [listed] = await agent.sessions()
    assert listed["session_id"] == session and listed["workspace"] == str(roots[0].resolve() / "alice" / "notes")
    assert listed["status"] == "idle" and listed["cost_usd"] > 0


async def test_the_record_another_instance_lists_a_session_from_says_idle_once_its_turn_is_done(agent):
    """An instance that does not follow the session lists the status its record keeps: that was saved with the
    turn's end before the closing `idle` was written, so it read 'streaming' until the session's next change."""
    session = await agent.create_session("alice/notes")
    assert isinstance((await turn(agent, session, "hello there"))[-1], Done)

    async def idle() -> bool:
        [record] = await agent.store.list(None)
        return record.id == session and record.status == "idle"

    with anyio.fail_after(10):
        await eventually(idle)


async def test_a_turn_is_said_to_stream_only_once_its_message_is_in_the_history(agent, monkeypatch):
    """Tabs read the history when they hear `streaming`: a message stored after it would be missing there."""
    session = await agent.create_session("alice/notes")
    live = await agent.session(session)
    happened = []
    add_message, publish = agent.store.add_message, live.relay.publish

    async def stored(session_id, role, content, message_id, token, **kw):
        await add_message(session_id, role, content, message_id, token, **kw)
        happened.append(f"stored {role}")

    def published(event, token=None):
        if isinstance(event, Status):
            happened.append(event.state)
        return publish(event, token)

    monkeypatch.setattr(agent.store, "add_message", stored)
    monkeypatch.setattr(live.relay, "publish", published)
    message_id = await agent.post_message(live, "hello there")
    with anyio.fail_after(60):
        async for logged in live.relay.follow():
            if isinstance(logged.event, Status) and logged.event.state == "streaming":
                assert logged.event.message_id == message_id
                assert [m["content"] for m in await agent.messages(session) if m["role"] == "user"] == ["hello there"]
            if isinstance(logged.event, Done):
                break
    assert happened == ["stored user", "streaming", "stored agent", "idle"]


async def test_a_message_the_history_cannot_keep_ends_its_turn_with_the_reason(agent, monkeypatch):
    session = await agent.create_session("alice/notes")

    async def refused(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(agent.store, "add_message", refused)
    events = await turn(agent, session, "hello there")
    assert [type(e).__name__ for e in events] == ["Status", "Error", "Status"]
    assert "the database went away" in events[1].message and events[-1].state == "idle"


async def test_the_record_says_idle_after_a_turn_that_failed_once_claude_was_under_way(agent, monkeypatch):
    """The record is saved as streaming once claude's session is known; a turn that failed after that left it
    so (only a turn that ended well saved it again)."""
    session = await agent.create_session("alice/notes")
    kept = agent.store.add_message

    async def no_answer(session_id, role, content, message_id, token, **kw):
        if role == "agent":
            raise RuntimeError("the answer could not be kept")
        await kept(session_id, role, content, message_id, token, **kw)

    monkeypatch.setattr(agent.store, "add_message", no_answer)
    events = await turn(agent, session, "hello there")
    assert any(isinstance(e, Error) and "could not be kept" in e.message for e in events)

    async def idle() -> bool:
        [record] = await agent.store.list(None)
        return record.claude_session_id is not None and record.status == "idle"

    with anyio.fail_after(10):
        await eventually(idle)


async def test_each_turn_costs_what_it_added_not_claudes_running_total(agent):
    """claude's `total_cost_usd` is a running total: two like turns cost alike, and add up."""
    session = await agent.create_session("alice/notes")
    first, second = (await turn(agent, session, "hello"))[-1], (await turn(agent, session, "again"))[-1]
    assert first.cost_usd > 0 and second.cost_usd == pytest.approx(first.cost_usd)
    [listed] = await agent.sessions()
    assert listed["cost_usd"] == pytest.approx(first.cost_usd + second.cost_usd)


async def test_the_history_and_attached_documents_reach_the_model_before_the_first_message(agent, scripted):
    history = [{"role": "user", "content": "My lamp is brass."}, {"role": "assistant", "content": "Noted: brass."}]
    attached = [
        {"name": "small.txt", "content": "the key is under the mat"},
        {"name": "../big report.md", "content": "chapter " * 5000},
    ]
    session = await agent.create_session("alice/notes", history=history, attached=attached)
    await turn(agent, session, "what do you know?")
    first = scripted.requests[-1].last_user_text()
    assert "My lamp is brass." in first and "Noted: brass." in first and "the key is under the mat" in first
    big = (await agent.session(session)).workspace.path / ".frobozz" / "attached" / "big-report.md"
    assert big.read_text() == "chapter " * 5000 and str(big) in first and "chapter chapter" not in first
    assert first.rstrip().endswith("what do you know?")
    await turn(agent, session, "and now?")
    assert "My lamp is brass." not in scripted.requests[-1].last_user_text()  # only before the first message
    for bad in ([{"role": "system", "content": "x"}], [{"role": "user"}], "text"):
        with pytest.raises(InputError):
            await agent.create_session("alice/notes", history=bad)
    with pytest.raises(InputError):
        await agent.create_session("alice/notes", attached=[{"name": "", "content": "x"}])
    for unkept in ("a\x00b", "a\ud800b"):  # (the database refused them: said as the database's failure)
        with pytest.raises(InputError, match="NUL"):
            await agent.post_message(await agent.session(session), unkept)
    with pytest.raises(InputError, match="max_turns"):
        await agent.create_session("alice/notes", max_turns="x")
    with pytest.raises(WorkspaceError):
        await agent.create_session("../alice")


async def test_a_write_inside_lands_one_outside_is_denied_and_the_tool_log_says_so(agent, open_dir):
    session = await agent.create_session("alice/notes", allowed_tools=["Write", "Read"])
    inside = (await agent.session(session)).workspace.path / "todo.md"
    outside = open_dir / "drop" / "escape.md"  # a folder claude could write in: only the guard stops it
    await turn(agent, session, f"write {inside}: buy oil")
    events = await turn(agent, session, f"write {outside}: took over")
    denied = [e for e in events if isinstance(e, ToolResult) and e.is_error]
    events += await turn(agent, session, "run echo hi")  # Bash is not among the allowed tools
    assert inside.read_text() == "buy oil" and not outside.exists()
    assert "only change files inside the workspace" in str(denied[0].output)
    assert any("not among the tools this session may use" in str(e.output) for e in events if isinstance(e, ToolResult))
    calls = await agent.tool_calls(session)
    assert [(c["name"], c["outcome"]) for c in calls] == [("Write", "ok"), ("Write", "denied"), ("Bash", "denied")]
    assert calls[0]["target"] == "todo.md" and calls[0]["input_size"] == "7 chars"


async def test_a_tool_call_the_database_cannot_keep_is_said_so_and_the_service_goes_on(agent, caplog):
    """The tool log is written beside the turn, in the service's task group: a database error there ended the
    service, every session with it."""
    session = await agent.create_session("alice/notes", allowed_tools=["Write"])
    inside = (await agent.session(session)).workspace.path / "todo.md"
    events = await turn_unlogged(agent, session, f"write {inside}: buy oil")
    assert isinstance(events[-1], Done) and inside.read_text() == "buy oil"
    events = await turn(agent, session, f"write {inside}: buy milk")
    assert isinstance(events[-1], Done) and inside.read_text() == "buy milk"
    assert "tool call 1 is not in its tool log: the database went away" in caplog.text
    assert [(c["name"], c["outcome"]) for c in await agent.tool_calls(session)] == [("Write", "ok")]


async def test_a_tool_call_or_message_under_a_lease_no_longer_held_is_not_kept(agent):
    """An instance that lost the session's lease (another took it, with a greater token) and does not know yet:
    what it writes of the turn it was running must not be kept beside, or instead of, the new holder's."""
    session = await agent.create_session("alice/notes")
    await turn(agent, session, "hello")
    token = (await agent.session(session)).relay.token
    assert token is not None
    call = {"name": "Write", "outcome": "ok"}
    await agent.store.add_tool_call(session, 1, call, token - 1)
    await agent.store.add_message(session, "agent", "from the lost lease", None, token - 1)
    assert await agent.tool_calls(session) == []
    assert [m["role"] for m in await agent.store.messages(session)] == ["user", "agent"]  # the turn's own
    await agent.store.add_tool_call(session, 1, call, token)
    assert await agent.tool_calls(session) == [call]


async def test_a_question_waits_for_the_answer_which_reaches_the_model_and_a_second_answer_is_refused(agent, scripted):
    session = await agent.create_session("alice/notes")
    live = await agent.session(session)
    async with anyio.create_task_group() as tg:
        seen = turn_in(tg, agent, session, "ask me")
        with anyio.fail_after(60):
            async for logged in live.relay.follow():
                if isinstance(logged.event, Question):
                    question = logged.event
                    break
        assert live.state == "waiting"
        await agent.answer(session, question.question_id, {"Which colour for the lamp?": "Blue"})
        with pytest.raises(QuestionError):
            await agent.answer(session, question.question_id, {"Which colour for the lamp?": "Red"})
    assert question.questions[0]["question"] == "Which colour for the lamp?"
    assert '"Which colour for the lamp?"="Blue"' in str(scripted.requests[-1].tool_results()[0].get("content"))
    assert isinstance(seen[-1], Done) and "Blue" in seen[-1].result


async def test_a_question_written_but_not_yet_in_this_instances_own_log_takes_its_answer(agent, monkeypatch):
    """Other instances' followers see a question once it is written, a moment before the instance that wrote it
    has it in its own log: an answer that comes to that one meanwhile counts (it was refused as never asked)."""
    session = await agent.create_session("alice/notes")
    live, held, gate = await agent.session(session), anyio.Event(), anyio.Event()
    write = agent.leases.log

    async def written_then_held(session_id, token, events):
        await write(session_id, token, events)
        if any(isinstance(logged.event, Question) for logged in events):
            held.set()
            await gate.wait()  # as a busy instance: written, not yet in its log

    monkeypatch.setattr(agent.leases, "log", written_then_held)
    async with anyio.create_task_group() as tg:
        seen = turn_in(tg, agent, session, "ask me")
        with anyio.fail_after(60):
            await held.wait()
        [question] = [e.event for e in await agent.leases.events_after(session, 0) if isinstance(e.event, Question)]
        assert not any(isinstance(logged.event, Question) for logged in live.relay.log)
        await agent.answer(session, question.question_id, {"Which colour for the lamp?": "Blue"})
        gate.set()
    assert isinstance(seen[-1], Done) and "Blue" in seen[-1].result
    other = await agent.create_session("alice/notes")
    for never_asked in ("0" * 16, question.question_id):  # and an id never asked (of this session) is refused
        with pytest.raises(QuestionError):
            await agent.answer(other, never_asked, {"Which colour for the lamp?": "Red"})
    for hostile in ("", "x" * 65, "a\x00b", "'; DROP TABLE agent_answers; --", "東京", 7):  # not ids the agent makes
        with pytest.raises(QuestionError):
            await agent.answer(session, hostile, {"Which colour for the lamp?": "Red"})


async def test_an_unanswered_question_times_out_with_a_clear_answer_to_the_model(make_agent, scripted):
    async with make_agent(question_timeout=0.5) as agent:
        session = await agent.create_session("alice/notes")
        events = await turn(agent, session, "ask me")
    assert any(isinstance(e, Question) for e in events)
    assert "did not answer within 0.5 s" in str(scripted.requests[-1].tool_results()[0].get("content"))


async def test_a_question_not_yet_written_when_it_times_out_still_times_out(make_agent, scripted):
    """The time-out comes from the instance that asked: it is recorded even while the database has not taken the
    question yet (a write that waits, as while the database is away), and the turn goes on once it has."""
    async with make_agent(question_timeout=0.5) as agent:
        session = await agent.create_session("alice/notes")
        gate, write = anyio.Event(), agent.leases.log

        async def held_then_written(session_id, token, events):
            if any(isinstance(logged.event, Question) for logged in events):
                await gate.wait()
            await write(session_id, token, events)

        agent.leases.log = held_then_written

        async def timed_out() -> bool:
            return bool(
                await agent.leases.pool.fetchval(
                    "SELECT count(*) FROM agent_answers WHERE session_id = $1 AND answers IS NULL", session
                )
            )

        async with anyio.create_task_group() as tg:
            seen = turn_in(tg, agent, session, "ask me")
            with anyio.fail_after(30):
                await eventually(timed_out)
            gate.set()  # the turn then goes on to its end (within `turn`'s own limit)
    assert isinstance(seen[-1], Done)
    assert "did not answer within 0.5 s" in str(scripted.requests[-1].tool_results()[0].get("content"))


async def test_a_message_sent_while_a_turn_runs_is_queued_and_answered_after_it(agent):
    session = await agent.create_session("alice/notes")
    live = await agent.session(session)
    first = await agent.post_message(live, "slowly")
    second = await agent.post_message(live, "next please")
    assert first != second
    dones = []
    with anyio.fail_after(60):
        async for logged in live.relay.follow():
            if isinstance(logged.event, Done):
                dones.append(logged.event.result)
                if len(dones) == 2:
                    break
    assert dones[0].startswith("one two three") and dones[1].startswith("You said: next please")
    states = [e.event.state for e in live.relay.log if isinstance(e.event, Status)]
    assert states == ["idle", "streaming", "idle", "streaming", "idle"]  # one turn after the other, not mixed


async def test_a_posted_message_leaves_the_session_busy_even_when_its_notice_claims_the_session_first(
    agent, monkeypatch
):
    """The message's notice (LISTEN/NOTIFY) starts a claim of its own; the poster returns only once it is through:
    returning sooner, the session looked idle with the message waiting (agentapi took a second one as stable)."""
    session = await agent.create_session("alice/notes")
    live = await agent.session(session)
    acquired = anyio.Event()
    acquire, post = agent.leases.acquire, agent.leases.post

    async def slow_acquire(session_id):
        token = await acquire(session_id)
        if token is not None:
            acquired.set()
            await anyio.sleep(0.5)  # the claim under way (a delay put in, not a wait for something)
        return token

    async def post_then_let_the_notice_claim_first(*args, **kwargs):
        kept = await post(*args, **kwargs)
        with anyio.fail_after(30):
            await acquired.wait()
        return kept

    monkeypatch.setattr(agent.leases, "acquire", slow_acquire)
    monkeypatch.setattr(agent.leases, "post", post_then_let_the_notice_claim_first)
    await agent.post_message(live, "slowly")
    assert live.owned and live.busy
    with anyio.fail_after(60):
        async for logged in live.relay.follow():
            if isinstance(logged.event, Done):
                break
    assert not agent._placement._claiming  # the claims' locks are not kept once none holds them


async def test_a_lease_released_while_the_database_fails_says_so_as_a_database_error(agent, monkeypatch, caplog):
    """Releases run in the service's own task group (an idle session let go, a failed claim's lease given up, a
    shutdown's hand-over), whose callers catch DatabaseError: a raw driver error there ended every session. The
    database is gone for every caller meanwhile, the lease keeper too, which says so and goes on (a stand-in
    that failed only on `acquire` broke the keeper instead, and with it the service, when it woke in the test)."""
    session = await agent.create_session("alice/notes")
    token = await agent.leases.acquire(session)
    gone = f"postgresql://nobody@127.0.0.1:{free_port()}/gone"  # every connection is refused
    async with asyncpg.create_pool(gone, min_size=0) as down:
        with monkeypatch.context() as patched:
            patched.setattr(agent.leases, "pool", down)
            with pytest.raises(DatabaseError, match="database failed"):
                await agent.leases.release(session, token, force=True)
            agent._placement.look_for_claims()
            with anyio.fail_after(30):
                await eventually(lambda: "the agent's leases not renewed" in caplog.text)
    assert await agent.leases.holder(session) == token  # nothing was released
    assert (await agent.session(session)).id == session  # and the service still answers


async def test_a_claim_that_fails_once_it_holds_the_lease_gives_the_lease_up_and_the_message_is_answered(
    agent, monkeypatch
):
    """Kept, the lease was renewed with the instance's others, and no instance would ever take the session up."""
    session = await agent.create_session("alice/notes")
    live = await agent.session(session)
    last_tool_call, failed = agent.store.last_tool_call, []

    async def failing_once(session_id):
        if not failed:
            failed.append(session_id)
            raise DatabaseError("the database went away for a moment")
        return await last_tool_call(session_id)

    monkeypatch.setattr(agent.store, "last_tool_call", failing_once)
    await agent.post_message(live, "hello there")
    assert failed == [session] and not live.owned
    with anyio.fail_after(60):
        async for logged in live.relay.follow():
            if isinstance(logged.event, Done):
                assert logged.event.result.startswith("You said: hello there")
                break


async def test_the_instance_that_takes_a_session_up_numbers_its_tool_calls_after_the_last_logged(make_agent):
    """A call the database could not keep leaves a gap in the log: counted, the calls logged numbered the next
    instance's first call as one already there, which was then dropped without a word."""
    async with make_agent() as first:
        session = await first.create_session("alice/notes", allowed_tools=["Write"])
        path = (await first.session(session)).workspace.path / "todo.md"
        await turn_unlogged(first, session, f"write {path}: one")  # its call 1 is not kept
        await turn(first, session, f"write {path}: two")  # call 2 is
    async with make_agent() as second:  # (the first handed the session over as it closed)
        events = await turn(second, session, f"write {path}: three")
        assert isinstance(events[-1], Done) and path.read_text() == "three"
        assert [c["input_size"] for c in await second.tool_calls(session)] == ["3 chars", "5 chars"]


async def test_a_claude_session_with_no_transcript_to_resume_is_started_anew_and_the_message_answered(agent, caplog):
    """Its instance was lost in its first turn, after claude's session id was kept and before the store had any
    of its transcript (seen under load in the two-drivers tests): resuming it failed every message after."""
    session = await agent.create_session("alice/notes")
    live = await agent.session(session)
    lost = "2794459e-3956-4fb3-9056-5f267c1073a3"
    await agent.store.pool.execute("UPDATE agent_sessions SET claude_session_id = $2 WHERE id = $1", session, lost)
    events = await turn(agent, session, "hello there")
    assert isinstance(events[-1], Done) and "You said: hello there" in events[-1].result
    assert f"claude's session {lost} has no transcript to resume" in caplog.text
    assert live.record.claude_session_id not in (None, lost)


async def test_after_a_restart_a_message_resumes_the_session_with_its_history_and_its_log(
    make_agent, scripted, tmp_path
):
    async with make_agent() as agent:
        session = await agent.create_session("alice/notes")
        await turn(agent, session, "the password is plugh")
        before = [(e.seq, e.event) for e in (await agent.session(session)).relay.log]
    elsewhere = tmp_path / "another-home"
    elsewhere.mkdir()  # a service on another machine: no claude transcript here, the database has it
    async with make_agent(home=elsewhere) as agent:
        assert [s["session_id"] for s in await agent.sessions()] == [session]
        assert [(e.seq, e.event) for e in (await agent.session(session)).relay.log] == before  # its log, replayed
        events = await turn(agent, session, "what came before?")
        with pytest.raises(SessionNotFoundError):
            await agent.session(session, workspace="bob/notes")
    assert "the password is plugh" in events[-1].result  # the model's request held the earlier turn


async def test_the_workspaces_mcp_server_overrides_the_platforms_and_skills_sync_in_before_the_session_starts(
    agent, roots, scripted, open_dir
):
    _, platform = roots
    drop = open_dir / "drop"  # each config's server writes its own file there, as the workspace's owner
    marker = drop / "workspace.json"  # (the warm spare, primed before the workspace had a config, may start the
    python = python_for_any_account()  # platform's: that is not the session's claude)
    probe = (
        "import json, os, sys; open(sys.argv[1] + '/' + sys.argv[2] + '.json', 'w').write(json.dumps("
        "{'config': sys.argv[2], 'workspace': os.environ.get('WORKSPACE_PATH')}))"
    )
    (platform / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"probe": {"command": python, "args": ["-c", probe, str(drop), "platform"]}}})
    )
    (platform / "skills" / "cartography").mkdir(parents=True)
    (platform / "skills" / "cartography" / "SKILL.md").write_text(
        "---\nname: cartography\ndescription: Draws maps of the underground\n---\nDraw the map.\n"
    )
    session = await agent.create_session("alice/notes")
    workspace = (await agent.session(session)).workspace.path
    (workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"probe": {"command": python, "args": ["-c", probe, str(drop), "workspace"]}}})
    )
    await turn(agent, session, "hello")
    with anyio.fail_after(30):
        await eventually(lambda: marker.exists() and marker.read_text())
    assert json.loads(marker.read_text()) == {"config": "workspace", "workspace": str(workspace)}
    assert (workspace / ".claude" / "skills" / "cartography" / "SKILL.md").is_file()
    assert "Draws maps of the underground" in json.dumps(scripted.requests[-1].body)  # claude found the skill


async def test_a_session_closed_mid_turn_ends_quietly_and_the_service_goes_on(agent):
    doomed = await agent.create_session("alice/notes")
    live = await agent.session(doomed)
    await agent.post_message(live, "slowly")
    with anyio.fail_after(60):
        async for logged in live.relay.follow():
            if isinstance(logged.event, TextDelta):
                break
    await agent.close_session(doomed)
    assert live.relay.closed and live.relay.log[-1].event == Status(state="closed")
    with pytest.raises(SessionNotFoundError):
        await agent.session(doomed)
    other = await agent.create_session("alice/other")
    events = await turn(agent, other, "still there?")
    assert isinstance(events[-1], Done) and events[-1].result.startswith("You said: still there?")
