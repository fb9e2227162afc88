"""The relay's log in the database: events published while the database is away are written once it is back."""

import anyio
import pytest

from frobozz.agent import Status, TextDelta
from frobozz.agent._relay import Relay
from frobozz.memory import DatabaseError
from tests.waiting import eventually

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


async def test_events_of_a_lease_let_go_while_they_were_written_are_never_written_under_the_next(monkeypatch):
    """The database is away while events said under lease 7 are written; the lease is let go and this instance
    takes the session again under lease 8 meanwhile. Tried again, they were written under 8 (as if the new
    driver had said them); and lease 7's write refused late dropped lease 8 (its events unsaid, its claude told
    the lease was lost)."""
    import frobozz.agent._relay
    from frobozz.agent.exceptions import LeaseLostError

    monkeypatch.setattr(frobozz.agent._relay, "RETRY_SECONDS", 0.01)
    written: list[tuple[int, str]] = []
    in_flight, go_on, lost = anyio.Event(), anyio.Event(), []

    async def persist(batch, token):
        if token == 7:
            in_flight.set()
            await go_on.wait()
            raise DatabaseError("the agent service's database failed: connection refused")
        written.extend((token, e.event.kind) for e in batch)

    relay = Relay(persist=persist, on_lost=lambda: lost.append(True))
    relay.take(7)
    async with anyio.create_task_group() as tg:
        tg.start_soon(relay.keep)
        relay.publish(TextDelta(text="said under 7"))
        with anyio.fail_after(30):
            await in_flight.wait()
        relay.drop()  # the lease let go (lost, or lapsed) ...
        relay.take(8)  # ... and taken again here
        go_on.set()
        relay.publish(Status(state="idle"))
        with anyio.fail_after(30):
            await eventually(lambda: written)
        relay.close()
    assert written == [(8, "status")] and relay.token == 8 and not lost

    async def refused(batch, token):
        if token == 7:
            in_flight.set()
            await go_on.wait()
            raise LeaseLostError("session s: another instance holds it now")

    relay = Relay(persist=refused, on_lost=lambda: lost.append(True))
    relay.take(7)
    in_flight, go_on = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(relay.keep)
        relay.publish(TextDelta(text="said under 7"))
        with anyio.fail_after(30):
            await in_flight.wait()
        relay.drop()
        relay.take(8)
        go_on.set()
        with anyio.fail_after(30):
            await eventually(lambda: not relay.writing)
        relay.close()
    assert relay.token == 8 and not lost
