"""A worker's firings traced (--trace), with their claudes kept warm between firings: the real claude CLI
answered by the scripted model, real Postgres; spans in memory (the `spans` fixture), kept in Postgres as
`--trace` keeps them for the web view's waterfall."""

import anyio
import asyncpg
import pytest

from frobozz import _spans as S
from frobozz.engine.testing import ScriptedModel
from frobozz.routines import RoutineSettings, RoutineWorker, routine
from frobozz.tracing import LocalSpans, run_spans, session_spans
from frobozz.web._waterfall import waterfall
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def answers(request):
    """The sidecar's questions (recall, suggestions) get nothing; a firing's message gets its reply."""
    text = request.last_user_text()
    if text.startswith(("Write up to", "Here is the last exchange")):
        return "NONE"
    return "Done: " + text.splitlines()[0][:60]


@pytest.fixture
async def scripted(monkeypatch):
    async with ScriptedModel(answers) as model:
        for name, value in model.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
        yield model


async def two_warm_firings(store, ledger, spans):
    """Two firings of one routine by a worker that keeps its claudes started between firings; the finished
    spans, and how many firings took a claude started ahead."""
    await store.add(routine(name="tick", kind="every", every=4, prompt="Tick."))
    worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(400):

            async def ready() -> object:
                return len([f for f in await store.firings("tick") if f["state"] == "done"]) >= 2

            await eventually(ready, interval=0.2)
        taken = worker.firer.warm._spares["tick"].spare.taken
        worker.stop()
    await worker.memory.aclose()
    return list(spans.get_finished_spans()), taken


async def test_each_warm_firing_s_claude_session_is_a_routine_s_linked_to_its_own_firing_and_no_other(
    store, ledger, routine_settings, scripted, spans
):
    """The spare's session span was opened when the spare started (during the firing before, whose span it was
    linked to), with none of the taker's attributes: now it opens when a firing takes the claude over."""
    finished, taken = await two_warm_firings(store, ledger, spans)
    assert taken >= 1  # (at least one firing's claude was started ahead: all but perhaps the first)
    fires = {f.context.span_id: f for f in finished if f.name == S.ROUTINE_FIRE and S.RUN_ID in f.attributes}
    sessions = [s for s in finished if s.name == S.SESSION and s.attributes.get(S.SESSION_KIND) != "sidecar"]
    assert len(fires) >= 2
    for fire in fires.values():  # each firing's claude session: a routine's, its run's, linked to its own firing
        [session] = [s for s in sessions if s.attributes.get(S.RUN_ID) == fire.attributes[S.RUN_ID]]
        assert session.attributes[S.SESSION_KIND] == "routine" and session.attributes[S.ROUTINE] == "tick"
        assert [link.context.span_id for link in session.links] == [fire.context.span_id]
    # and no claude session is linked to a firing it did not run (a spare started during one, never taken)
    for session in sessions:
        for link in session.links:
            if link.context.span_id in fires:
                assert fires[link.context.span_id].attributes[S.RUN_ID] == session.attributes.get(S.RUN_ID)


async def test_a_warm_firing_s_waterfall_shows_its_one_turn_numbered_1_by_its_run_and_by_its_session(
    store, ledger, routine_settings, scripted, spans, cortex_settings
):
    """The spare's rehearsed turns (its first turn answered by the engine, then `/clear`) were counted and traced
    as the session's: the firing's one turn was turn 3, and its session's page showed the `/clear` as turn 2."""
    finished, taken = await two_warm_firings(store, ledger, spans)
    assert taken >= 1
    url = cortex_settings.database_url.get_secret_value()
    local = LocalSpans(url, keep_days=7)  # kept as --trace keeps them, read as the web view reads them
    try:
        await anyio.to_thread.run_sync(local.export, finished)
    finally:
        local.shutdown()
    runs = {f.attributes[S.RUN_ID] for f in finished if f.name == S.ROUTINE_FIRE and S.RUN_ID in f.attributes}
    claude_sessions = {  # each run's claude session, as its turns say
        s.attributes[S.RUN_ID]: s.attributes[S.SESSION_ID]
        for s in finished
        if s.name == S.TURN and s.attributes.get(S.SESSION_KIND) == "routine"
    }
    assert len(runs) >= 2 and set(claude_sessions) == runs
    connection = await asyncpg.connect(url)
    try:
        for run_id, session_id in claude_sessions.items():
            by_run = waterfall(await run_spans(connection, run_id))
            by_session = waterfall(await session_spans(connection, session_id))
            assert [t.title for t in by_run] == ["turn 1"] and [t.title for t in by_session] == ["turn 1"]
            [turn] = by_run
            assert turn.bars[0].name == S.TURN and S.ROUTINE_FIRE not in {b.name for b in turn.bars}
    finally:
        await connection.close()
