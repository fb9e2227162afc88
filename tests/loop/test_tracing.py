"""The memory loop's spans are in the turn's trace: the orientation, the recall with the memories it found
and their scores (and, under it, the cortex search's embedding, SQL and scoring, and the sidecar's turn),
the archive and the suggestions that follow the turn."""

import anyio
import pytest

from frobozz import _spans as S
from frobozz.engine import Result
from frobozz.engine.testing import ScriptedModel
from frobozz.loop import MemorySession, here_and_now
from tests.engine.conftest import until
from tests.loop.test_session import SISTER, script

pytestmark = pytest.mark.anyio


async def test_the_recall_span_holds_the_memories_found_and_sits_in_the_turn_s_trace(
    make_options, memory_service, spans
):
    store = await memory_service.store()
    kept, _ = await store.store(SISTER, namespace="chat")
    async with ScriptedModel(script) as model:
        async with MemorySession(
            make_options(model),
            memory_service,
            namespace="chat",
            sidecar=make_options(model),
            providers=lambda *_: [here_and_now("test client")],  # (the memory is not shown
            deadline=30,
        ) as loop:  # in the orientation)
            await loop.send("What does my sister Ana teach?")
            await until(loop.events(), Result)
            with anyio.fail_after(60):
                await loop.settled()
    finished = spans.get_finished_spans()

    def named(name):
        return [s for s in finished if s.name == name]

    [turn] = [
        t
        for t in named(S.TURN)
        if t.parent is None
        and t.attributes.get(S.TURN_OUTCOME) == "result"
        and any(c.parent and c.parent.span_id == t.context.span_id for c in named(S.RECALL))
    ]
    trace_id = turn.context.trace_id
    [recall] = named(S.RECALL)
    assert recall.context.trace_id == trace_id and recall.parent.span_id == turn.context.span_id
    assert kept.id in recall.attributes[S.MEMORY_IDS] and recall.attributes[S.MEMORY_FOUND] >= 1
    assert all(0 < score <= 1 for score in recall.attributes[S.MEMORY_SCORES])
    assert named(S.ORIENTATION)[0].context.trace_id == trace_id
    under = {s.name for s in finished if s.context.trace_id == trace_id}
    assert {S.EMBED, S.SQL, S.SCORE, S.ARCHIVE} <= under  # the search's parts, in the same trace
    sidecar_turns = [t for t in named(S.TURN) if t.parent is not None and t.context.trace_id == trace_id]
    assert sidecar_turns  # recall's question to the sidecar is a turn inside the recall
    [suggest] = named(S.SUGGEST)
    assert suggest.context.trace_id == trace_id
