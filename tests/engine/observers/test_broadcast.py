import anyio
import pytest

from frobozz.engine.observers import Broadcast
from tests.events import turn_end

pytestmark = pytest.mark.anyio


async def test_every_subscriber_gets_every_event_and_a_stalled_one_only_loses_its_own():
    broadcast = Broadcast(buffer=3)
    async with broadcast.subscribe() as fast, broadcast.subscribe() as stalled:
        for i in range(5):
            broadcast.on_event(turn_end(str(i)))
            with anyio.fail_after(5):
                assert (await fast.receive()).result == str(i)
        assert [(await stalled.receive()).result for _ in range(3)] == ["0", "1", "2"]
    assert broadcast.dropped == 2
    broadcast.on_event(turn_end("after"))  # nobody subscribed: nothing to do, nothing raised
