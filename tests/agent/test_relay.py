"""The relay's log in the database: events published while the database is away are written once it is back."""

import anyio
import pytest

from frobozz.agent import Status, TextDelta
from frobozz.agent._relay import Relay
from frobozz.memory import DatabaseError

pytestmark = pytest.mark.anyio


async def test_events_published_while_the_database_is_away_are_written_in_order_once_it_is_back(monkeypatch):
    import frobozz.agent._relay

    monkeypatch.setattr(frobozz.agent._relay, "RETRY_SECONDS", 0.01)
    written: list[int] = []
    failures = [2]  # the database is away for the first two tries
    saved = anyio.Event()

    async def persist(batch, token):
        assert token == 7  # written under the lease the relay holds
        if failures[0]:
            failures[0] -= 1
            raise DatabaseError("the agent service's database failed: connection refused")
        written.extend(e.seq for e in batch)
        if len(written) == 3:
            saved.set()

    relay = Relay(persist=persist)
    relay.take(7)
    async with anyio.create_task_group() as tg:
        tg.start_soon(relay.keep)
        relay.publish(Status(state="streaming"))
        relay.publish(TextDelta(text="hello"))
        relay.publish(Status(state="idle"))
        with anyio.fail_after(30):
            await saved.wait()
        relay.close()
    assert written == [1, 2, 3]
