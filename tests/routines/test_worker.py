"""Routines fired by workers: real Postgres, the real claude CLI answered by the scripted model, a real
IMAP server; each firing a memory-loop session recorded as a run."""

from itertools import pairwise

import anyio
import pytest

from frobozz import _spans as S
from frobozz.engine.testing import Reply, ScriptedModel, Text, ToolUse
from frobozz.memory import MemoryService
from frobozz.routines import Firer, RoutineWorker, routine
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
MISSED = "missed: no worker was looking when it was due"


def answers(request):
    """The sidecar's questions (recall, suggestions) get nothing; a firing's message gets its reply."""
    text = request.last_user_text()
    if text.startswith(("Write up to", "Here is the last exchange")):
        return "NONE"
    return "Done: " + text.splitlines()[0][:60]


def firing_requests(model, marker):
    return [r.last_user_text() for r in model.requests if marker in r.last_user_text()]


@pytest.fixture
async def scripted(monkeypatch, tmp_path):
    async with ScriptedModel(answers) as model:
        for name, value in model.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
        yield model


async def test_a_firing_run_now_is_a_memory_session_recorded_as_a_run(
    store, ledger, routine_settings, scripted, cortex_settings, spans
):
    await store.add(routine(name="brief", kind="cron", cron="@daily", prompt="Write the morning briefing."))
    await store.claim("brief", "run:1", "run by hand")
    memory = MemoryService(cortex_settings)
    try:
        with anyio.fail_after(300):
            state = await Firer(store, ledger, memory, routine_settings)(
                {"routine": "brief", "key": "run:1", "manual": True}
            )
        sessions = await memory.sessions()
        firing = await store.firing("brief", "run:1")
        (run,) = await ledger.runs(game="routine:brief")
        turns = await ledger.turns(run["run_id"])
        (loop_session,) = await sessions.list("routine-brief")
        archived = await sessions.transcript(loop_session.id)
    finally:
        await memory.aclose()
    assert state == "done" and firing["state"] == "done" and firing["run_id"] == run["run_id"]
    assert (run["status"], run["mode"], run["turns"]) == ("finished", "routine", 1)
    assert turns[0].reply.startswith("Done:")
    assert firing_requests(scripted, "Write the morning briefing.")
    # recall searched with the firing's own words: no sidecar question for queries held the message back
    assert [s.name for s in spans.get_finished_spans()].count(S.RECALL) == 1
    assert not firing_requests(scripted, "Write up to")
    assert any("morning briefing" in e.content for e in archived)  # the memory loop archived the firing
    assert any(e.content.startswith("Done:") for e in archived)
    # fired again: nothing, it has ended
    memory = MemoryService(cortex_settings)
    try:
        assert await Firer(store, ledger, memory, routine_settings)({"routine": "brief", "key": "run:1"}) is None
    finally:
        await memory.aclose()
    # traced: the firing a span (its routine, kind, run, end), its claude session a routine's, linked to it
    fires = [s for s in spans.get_finished_spans() if s.name == S.ROUTINE_FIRE]
    assert [(f.attributes[S.ROUTINE], f.attributes[S.ROUTINE_STATE]) for f in fires] == [
        ("brief", "done"),
        ("brief", "nothing to do"),
    ]
    fired = fires[0]
    assert fired.attributes[S.ROUTINE_KIND] == "cron" and fired.attributes[S.ROUTINE_MANUAL] is True
    assert fired.attributes[S.RUN_ID] == run["run_id"] and fired.attributes[S.ROUTINE_REASON] == "finished"
    [session] = [
        s for s in spans.get_finished_spans() if s.name == S.SESSION and s.attributes.get(S.SESSION_KIND) == "routine"
    ]
    assert session.attributes[S.RUN_ID] == run["run_id"] and session.attributes[S.ROUTINE] == "brief"
    assert [link.context.span_id for link in session.links] == [fired.context.span_id]
    [turn] = [
        s for s in spans.get_finished_spans() if s.name == S.TURN and s.attributes.get(S.SESSION_KIND) == "routine"
    ]
    assert turn.attributes[S.TURN_OUTCOME] == "result"


async def fire_once(store, ledger, settings, cortex_settings, name):
    await store.claim(name, "run:1", "run by hand")
    memory = MemoryService(cortex_settings)
    try:
        with anyio.fail_after(300):
            await Firer(store, ledger, memory, settings)({"routine": name, "key": "run:1", "manual": True})
    finally:
        await memory.aclose()
    firing = await store.firing(name, "run:1")
    return firing, await ledger.get(firing["run_id"])


async def test_a_firing_that_cannot_make_its_workspace_is_failed_with_its_run_saying_why(
    store, ledger, routine_settings, scripted, cortex_settings, tmp_path
):
    """A file stands where the workspace's folder goes (put there after the routine was added): mkdir's OSError
    was taken for the database's going away, so the firing and its run stayed running for ever."""
    blocked = tmp_path / "blocked"
    await store.add(routine(name="brief", kind="cron", cron="@daily", prompt="Brief.", workspace=str(blocked / "ws")))
    blocked.write_text("a file where a folder goes")
    firing, run = await fire_once(store, ledger, routine_settings, cortex_settings, "brief")
    assert firing["state"] == "failed" and firing["reason"].startswith("NotADirectoryError: ")
    assert (run["status"], run["reason"]) == ("failed", firing["reason"])
    assert not firing_requests(scripted, "Brief.")  # no claude asked


@pytest.fixture
async def stubborn(monkeypatch):
    """A model that keeps reading a file (max turns), or, asked to be slow, does not answer for ten minutes."""

    def answer(request):
        text = request.last_user_text()
        if text.startswith(("Write up to", "Here is the last exchange", "Summarise")):
            return "NONE"
        if "Be slow." in text:
            return Reply((Text("..."),), delay=600)
        return Reply((ToolUse("Read", {"file_path": "/etc/hostname"}),))

    async with ScriptedModel(answer) as model:
        for name, value in model.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
        yield model


async def test_a_firing_past_its_time_or_turns_ends_cleanly_and_says_which_limit(
    store, ledger, routine_settings, stubborn, cortex_settings
):
    await store.add(routine(name="slow", kind="every", every=3600, prompt="Be slow.", max_seconds=3))
    firing, run = await fire_once(store, ledger, routine_settings, cortex_settings, "slow")
    assert firing["state"] == "failed" and firing["reason"].startswith("time limit")
    assert run["status"] == "failed" and run["reason"].startswith("time limit") and run["ended_at"]
    await store.add(routine(name="loop", kind="every", every=3600, prompt="Read forever.", max_turns=2))
    firing, run = await fire_once(store, ledger, routine_settings, cortex_settings, "loop")
    assert firing["reason"].startswith("max turns") and run["reason"].startswith("max turns")


async def test_a_game_firing_is_a_run_of_the_game_with_memory_in_the_routine_s_namespace(
    store, ledger, routine_settings, monkeypatch, cortex_settings
):
    def answer(request):
        text = request.last_user_text()
        if text.startswith(("Write up to", "Here is the last exchange", "Summarise")):
            return "NONE"
        return "<command>look</command>"

    async with ScriptedModel(answer) as model:
        for name, value in model.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
        await store.add(
            routine(
                name="solitude",
                kind="cron",
                cron="@daily",
                game="zork1",
                max_turns=3,
                prompt="A quiet hour: play a little Zork.",
            )
        )
        firing, run = await fire_once(store, ledger, routine_settings, cortex_settings, "solitude")
        first = next(r.last_user_text() for r in model.requests if "A quiet hour" in r.last_user_text())
    assert firing["state"] == "done" and firing["reason"] == "game run: max turns", firing
    assert (run["game"], run["turns"], run["status"]) == ("zork1", 3, "finished")
    assert "You are playing Zork I" in first and "West of House" in first
    assert run["info"] and '"memory_namespace": "routine-solitude"' in run["info"]


async def test_the_global_concurrency_limit_holds_firings_of_different_routines_one_at_a_time(
    store, ledger, routine_settings, scripted
):
    from frobozz.routines import RoutineSettings

    for name in ("left", "right"):
        await store.add(routine(name=name, kind="every", every=2, prompt=f"Tick {name}."))
    worker = RoutineWorker(store, ledger, RoutineSettings(routine_concurrency=1, routine_tick=0.2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(400):

            async def ready() -> object:
                return await done_in(store, "left") and await done_in(store, "right")

            await eventually(ready, interval=0.2)
        for name in ("left", "right"):
            await store.set_paused(name, True)
        with anyio.fail_after(400):

            async def ready() -> object:
                return not (await store.open_firings("left") or await store.open_firings("right"))

            await eventually(ready, interval=0.2)
        worker.stop()
    await worker.memory.aclose()
    done = sorted(await done_in(store, "left") + await done_in(store, "right"), key=lambda f: f["started"])
    assert {f["routine"] for f in done} == {"left", "right"}
    assert all(a["ended"] <= b["started"] for a, b in pairwise(done))  # never two at once


async def test_a_worker_keeps_its_routine_s_claudes_started_between_firings_and_each_firing_takes_them(
    store, ledger, routine_settings, scripted
):
    """The next firing's claude waits started (the engine's warm spare), and the memory loop's sidecars are the
    worker's, shared by every firing."""
    from frobozz.routines import RoutineSettings

    await store.add(routine(name="warmth", kind="every", every=4, prompt="Tick warmth."))
    worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(400):

            async def ready() -> object:
                return len(await done_in(store, "warmth")) >= 2

            await eventually(ready, interval=0.2)
        warm = worker.firer.warm
        spare, sidecar = warm._spares["warmth"].spare, warm._sidecars[None]
        await store.set_paused("warmth", True)  # its spare is let go, a firing running now keeps its claude
        with anyio.fail_after(400):

            async def ready() -> object:
                return not await store.open_firings("warmth")

            await eventually(ready, interval=0.2)
        taken, started, answered = spare.taken, sidecar.started, sidecar.answered
        worker.stop()
    await worker.memory.aclose()
    done = await done_in(store, "warmth")
    asked = [r for r in scripted.requests if r.last_user_text().startswith("Here is the last exchange")]
    assert taken >= len(done) - 1 >= 1  # all but perhaps the first took a claude started ahead
    assert answered >= len(done) and started >= 2  # the suggestions' questions, on the shared ones
    assert asked  # the firings' suggestions go to the shared sidecars (each one's: tests/loop/test_session.py)
    assert worker.firer.warm is None


async def test_a_worker_keeping_claudes_warm_fails_a_firing_whose_workspace_cannot_be_made_and_looks_on(
    store, ledger, scripted, tmp_path, caplog
):
    """Starting the firing's claude ahead makes its workspace first: that OSError was taken for the database's
    going away, so the worker's looks started again and again, and the firing never came."""
    from frobozz.routines import RoutineSettings

    blocked = tmp_path / "blocked"
    await store.add(routine(name="tick", kind="every", every=1, prompt="Tick.", workspace=str(blocked / "ws")))
    blocked.write_text("a file where a folder goes")
    worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.2))  # (two claudes kept warm)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(120):

            async def failed() -> object:
                return [f for f in await store.firings("tick") if f["state"] == "failed"]

            await eventually(failed, interval=0.2)
        worker.stop()
    await worker.memory.aclose()
    [first, *_] = await failed()
    assert first["reason"].startswith("NotADirectoryError: ")
    assert "its claude is not started ahead" in caplog.text and "database" not in caplog.text
    assert not firing_requests(scripted, "Tick.")


async def done_in(store, name):
    return [f for f in await store.firings(name) if f["state"] == "done"]


async def test_a_firing_whose_database_goes_away_mid_turn_is_fired_again_once_it_is_back_and_nothing_recorded_is_lost(
    store, ledger, routine_settings, postgres, monkeypatch, caplog
):
    import logging
    import threading

    from pgserver._commands import pg_ctl

    from frobozz.routines import RoutineSettings, enqueue

    asked, released = threading.Event(), threading.Event()

    def answer(request):
        text = request.last_user_text()
        if text.startswith(("Write up to", "Here is the last exchange", "Summarise")):
            return "NONE"
        if "Say during." in text and not asked.is_set():
            asked.set()
            released.wait(300)  # the database goes away while this turn is in hand
        return "Said."

    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "2")
    caplog.set_level(logging.WARNING, logger="frobozz.routines")
    for routine_name in ("before", "during"):
        await store.add(routine(name=routine_name, kind="cron", cron="@yearly", prompt=f"Say {routine_name}."))

    def postgres_stopped():
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=postgres.pgdata, user=postgres.system_user)

    async with ScriptedModel(answer) as model:
        for key, value in model.env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
        worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.5))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run)
                await enqueue(store, ledger, "before", "run:1", "by hand")
                with anyio.fail_after(300):

                    async def ready() -> object:
                        return await done_in(store, "before")

                    await eventually(ready, interval=0.2)
                await enqueue(store, ledger, "during", "run:1", "by hand")
                with anyio.fail_after(300):
                    await eventually(asked.is_set, interval=0.1)
                await anyio.to_thread.run_sync(postgres_stopped)  # the embedded server itself, stopped
                released.set()
                with anyio.fail_after(300):
                    await eventually(  # the worker's line saying so (the firing's, or its looks')
                        lambda: any("trying again in" in r.getMessage() for r in caplog.records), interval=0.1
                    )
                await anyio.to_thread.run_sync(postgres.ensure_postgres_running)  # and started again
                with anyio.fail_after(400):

                    async def ready() -> object:
                        return (await store.firing("during", "run:1"))["state"] not in ("queued", "running")

                    await eventually(ready, interval=0.2)
                worker.stop()
        finally:
            released.set()
            await anyio.to_thread.run_sync(postgres.ensure_postgres_running)
            await worker.memory.aclose()
        during = [
            r
            for r in model.requests
            if "Say during." in r.last_user_text()
            and not r.last_user_text().startswith(("Write up to", "Here is the last exchange", "Summarise"))
        ]
    before = await store.firing("before", "run:1")
    firing = await store.firing("during", "run:1")
    assert before["state"] == "done" and (await ledger.get(before["run_id"]))["status"] == "finished"  # kept
    assert firing["state"] == "done" and firing["attempts"] == 2, firing  # delivered again, once
    assert len(during) == 2
    (run,) = await ledger.runs(game="routine:during")
    assert run["run_id"] == firing["run_id"] and (run["status"], run["turns"]) == ("finished", 1)
    assert len(await ledger.turns(run["run_id"])) == 1  # the retry's turn, not two
    # said in lines: no traceback through Frobozz's code (one the log filter keeps whole), no unlock on a
    # connection released already (ninety lines through pgqueuer's "Exception while processing" before)
    assert "cannot call Connection.execute()" not in caplog.text
    assert not [r.getMessage() for r in caplog.records if through_frobozz(r)]


def through_frobozz(record):
    import traceback

    from frobozz.cli._logs import _OURS

    error = record.exc_info[1] if record.exc_info else None
    return error is not None and any(f.filename.startswith(_OURS) for f in traceback.extract_tb(error.__traceback__))


async def test_a_resumed_schedule_fires_from_its_next_due_time_and_its_pause_s_due_times_are_neither_fired_nor_missed(
    store, ledger, routine_settings
):
    """Resumed, it fired a due time inside the pause at once and recorded the others as missed by no worker."""
    from datetime import UTC, datetime, timedelta

    from frobozz.engine.producers import Schedule
    from frobozz.routines import next_due

    await store.add(routine(name="t2", kind="every", every=20, prompt="Note."))
    await store.pool.execute("UPDATE routines SET created = now() - interval '10 minutes'")
    fired = Schedule("Note.", every=20, source="t2").next_after(datetime.now(UTC) - timedelta(seconds=120))
    await store.claim("t2", Schedule.key(fired), "due", due=fired, state="done")  # before the pause
    await store.set_paused("t2", True)
    paused = (await store.get("t2"))["updated"]
    await store.set_paused("t2", True)  # paused again: still paused since then
    assert (await store.get("t2"))["updated"] == paused
    await store.set_paused("t2", False)
    resumed = (await store.get("t2"))["updated"]
    row = await store.get("t2")
    assert await next_due(store, row) > resumed
    await RoutineWorker(store, ledger, routine_settings).look(row)
    recorded = {f["due"]: f for f in await store.firings("t2") if f["due"] <= resumed}
    assert [d for d in recorded if d >= paused] == []  # none of the pause
    assert recorded.pop(fired)["state"] == "done"  # (the due times between it and the pause: missed)
    assert all((f["state"], f["reason"]) == ("skipped", MISSED) for f in recorded.values())


async def test_a_resumed_schedule_records_as_missed_the_due_times_no_worker_saw_before_its_pause_and_none_of_the_pause(
    store, ledger, scripted
):
    """A schedule counting from its resume recorded nothing of what no worker was looking at before the pause (it
    was 'missed' before pauses were counted); the pause's own due times are still neither fired nor recorded."""
    from datetime import UTC, datetime, timedelta

    from frobozz.engine.producers import Schedule
    from frobozz.routines import RoutineSettings

    await store.add(routine(name="tock", kind="every", every=2, prompt="Note the tock."))
    await store.pool.execute("UPDATE routines SET created = now() - interval '10 minutes' WHERE name = 'tock'")
    schedule = Schedule("Note the tock.", every=2, source="tock")
    fired = schedule.next_after(datetime.now(UTC) - timedelta(seconds=12))
    await store.claim("tock", Schedule.key(fired), "due", due=fired, state="done")  # then no worker looked
    await store.set_paused("tock", True)
    paused = (await store.get("tock"))["updated"]
    during = schedule.next_after(paused)
    with anyio.fail_after(10):  # a due time of the pause comes
        await eventually(lambda: datetime.now(UTC) > during, interval=0.1)
    await store.set_paused("tock", False)
    resumed = (await store.get("tock"))["updated"]
    worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(400):

            async def fired_since_resumed() -> object:
                return [f for f in await done_in(store, "tock") if f["due"] > resumed]

            await eventually(fired_since_resumed, interval=0.2)
        await store.set_paused("tock", True)
        with anyio.fail_after(400):

            async def none_open() -> object:
                return not await store.open_firings("tock")

            await eventually(none_open, interval=0.2)
        worker.stop()
    await worker.memory.aclose()
    recorded = {f["due"]: f for f in await store.firings("tock", limit=1000)}
    before = [schedule.next_after(fired)]
    while (following := schedule.next_after(before[-1])) < paused:
        before.append(following)
    assert len(before) >= 4 and paused < during < resumed
    assert sorted(d for d in recorded if fired < d < paused) == before
    assert all((recorded[d]["state"], recorded[d]["reason"]) == ("skipped", MISSED) for d in before)
    assert [d for d in recorded if paused <= d <= resumed] == []  # none of the pause
    assert any(f["state"] == "done" for d, f in recorded.items() if d > resumed)  # fired from its next due time


def fake_fire(entered, release):
    """`fire` answered here: a firing that runs until `release` is set (no claude)."""
    from frobozz.routines._fire import Fired

    async def fire(spec, key, title, item, run_id, **_):
        entered.set()
        await release.wait()
        return Fired(state="done", reason="finished", run_id=run_id, cost_usd=0.0)

    return fire


async def test_a_due_time_that_came_while_its_routine_s_firing_had_no_live_worker_is_missed_not_an_overlap(
    store, ledger, routine_settings, monkeypatch
):
    """Its worker killed mid-firing, the firing is taken up again after the next due time: that due time was
    labelled 'overlap' though nothing ran when it came; a due time while the firing runs is still an overlap."""
    from datetime import UTC, datetime, timedelta

    from frobozz.engine.producers import Schedule
    from frobozz.routines import _worker

    entered, release = anyio.Event(), anyio.Event()
    monkeypatch.setattr(_worker, "fire", fake_fire(entered, release))
    await store.add(routine(name="t", kind="every", every=20, prompt="Note."))
    base = Schedule("Note.", every=20, source="t").next_after(datetime.now(UTC) - timedelta(seconds=20))
    killed, missed, running = (base - timedelta(seconds=40), base - timedelta(seconds=20), base + timedelta(seconds=20))
    for due in (killed, missed, running):
        await store.claim("t", Schedule.key(due), "due", due=due)
    await store.start("t", Schedule.key(killed), "20260101-000000-abcdef")  # by the worker that was killed
    await store.pool.execute("UPDATE routine_firings SET started = $1 WHERE key = $2", killed, Schedule.key(killed))
    firer = Firer(store, ledger, None, routine_settings)
    async with anyio.create_task_group() as tg:
        tg.start_soon(firer, {"routine": "t", "key": Schedule.key(killed)})  # taken up again
        with anyio.fail_after(30):
            await entered.wait()
            assert await firer({"routine": "t", "key": Schedule.key(missed)}) == "skipped"
            assert await firer({"routine": "t", "key": Schedule.key(running)}) == "skipped"
        release.set()
    states = {f["key"]: (f["state"], f["reason"]) for f in await store.firings("t")}
    assert states == {
        Schedule.key(killed): ("done", "finished"),
        Schedule.key(missed): ("skipped", "missed: no worker was looking when it was due"),
        Schedule.key(running): ("skipped", "overlap: the routine's previous firing was still running"),
    }


async def test_a_due_time_while_a_killed_firing_s_first_worker_ran_it_is_an_overlap_and_after_it_died_missed(
    store, ledger, routine_settings, monkeypatch
):
    """Taken up again after its worker died, the firing's start was the re-take's: a due time that came while its
    first worker still ran it was recorded as 'missed: no worker was looking', though the routine was busy. The
    worker marks itself alive while a firing runs; its death here is its task's end, the firing left running."""
    from datetime import timedelta

    from frobozz.routines import _worker

    monkeypatch.setattr(_worker, "ALIVE_EVERY", 0.01)
    entered, release = anyio.Event(), anyio.Event()
    monkeypatch.setattr(_worker, "fire", fake_fire(entered, release))
    await store.add(routine(name="t4", kind="every", every=3600, prompt="Note."))
    await store.claim("t4", "first", "due")
    firer = Firer(store, ledger, None, routine_settings)

    async def seen() -> bool:
        return (await store.firing("t4", "first"))["alive"] is not None

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:  # the first worker: it runs the firing, then dies
            tg.start_soon(firer, {"routine": "t4", "key": "first"})
            await entered.wait()
            await eventually(seen, interval=0.01)
            tg.cancel_scope.cancel()
    died = await store.firing("t4", "first")
    assert died["state"] == "running" and died["started"] < died["alive"]
    entered = anyio.Event()
    monkeypatch.setattr(_worker, "fire", fake_fire(entered, release))
    async with anyio.create_task_group() as tg:
        tg.start_soon(firer, {"routine": "t4", "key": "first"})  # taken up again
        with anyio.fail_after(30):
            await entered.wait()
            taken = await store.firing("t4", "first")
            dues = {
                "ran": died["started"] + (died["alive"] - died["started"]) / 2,
                "dead": died["alive"] + (taken["started"] - died["alive"]) / 2,
                "again": taken["started"] + timedelta(seconds=1),
            }
            for key, due in dues.items():
                await store.claim("t4", key, "due", due=due)
                assert await firer({"routine": "t4", "key": key}) == "skipped"
        release.set()
    states = {f["key"]: (f["state"], f["reason"]) for f in await store.firings("t4")}
    overlap = ("skipped", "overlap: the routine's previous firing was still running")
    assert taken["attempts"] == 2 and states == {
        "first": ("done", "finished"),
        "ran": overlap,
        "dead": ("skipped", MISSED),
        "again": overlap,
    }


async def test_a_killed_worker_s_firing_taken_up_once_its_routine_is_paused_ends_failed_with_its_run(
    store, ledger, routine_settings
):
    """Its worker killed mid-firing, then the routine paused: taken up again, the firing was skipped as 'paused
    before it fired' (it had fired), and its run stayed 'running' for ever."""
    from frobozz.routines._fire import run_info

    await store.add(routine(name="t3", kind="every", every=3600, prompt="Note."))
    await store.claim("t3", "run:1", "run by hand")
    await store.start("t3", "run:1", "20260101-000000-abcdef")  # by the worker that was killed
    await ledger.add(run_info((await store.get("t3"))["spec"], "20260101-000000-abcdef", "run by hand"), queued=False)
    await store.set_paused("t3", True)
    with anyio.fail_after(30):
        assert await Firer(store, ledger, None, routine_settings)({"routine": "t3", "key": "run:1"}) == "failed"
    firing, run = await store.firing("t3", "run:1"), await ledger.get("20260101-000000-abcdef")
    abandoned = "abandoned: its worker died mid-firing, and the routine was paused before it was taken up again"
    assert (firing["state"], firing["reason"]) == ("failed", abandoned)
    assert (run["status"], run["reason"]) == ("failed", abandoned) and run["ended_at"]
