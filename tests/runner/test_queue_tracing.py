"""A queued run's life is one trace across workers: the job carries its trace context in the queue, and
each worker's `process` span (and the run's session under it) belongs to the trace its `send` began."""

import anyio
import pytest

from frobozz import _spans as S
from frobozz.runner import RunConfig, Worker, enqueue
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_a_queued_run_taken_over_by_a_second_worker_is_one_trace(ledger, runner_settings, spans):
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=12), runner_settings, 1)
    first = Worker(ledger, runner_settings)
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.run)
        with anyio.fail_after(120):

            async def ready() -> object:
                return (await ledger.get(run_id))["turns"] >= 3

            await eventually(ready)
        first.stop()  # the run in hand goes back to the queue at its next turn
    assert (await ledger.get(run_id))["status"] == "queued"
    second = Worker(ledger, runner_settings)
    async with anyio.create_task_group() as tg:
        tg.start_soon(second.run)
        with anyio.fail_after(180):

            async def ready() -> object:
                return (await ledger.get(run_id))["status"] == "finished"

            await eventually(ready, interval=0.1)
        second.stop()

    finished = spans.get_finished_spans()
    [send] = [s for s in finished if s.name.startswith("send play:")]
    processed = [s for s in finished if s.name.startswith("process play:")]
    assert len(processed) == 2 and all(p.attributes[S.RUN_ID] == run_id for p in processed)
    assert {p.context.trace_id for p in processed} == {send.context.trace_id}  # one trace, two workers
    assert all(p.parent.span_id == send.context.span_id for p in processed)
    sessions = [s for s in finished if s.name == S.SESSION and s.attributes.get(S.RUN_ID) == run_id]
    assert len(sessions) == 2  # each worker's claude session, linked to the job's process span there
    assert {s.links[0].context.span_id for s in sessions} == {p.context.span_id for p in processed}
