import anyio
import pytest

from frobozz.engine import Result
from frobozz.engine.observers import Broadcast

pytestmark = pytest.mark.anyio


def _result(text: str) -> Result:
    return Result(
        subtype="success",
        is_error=False,
        result=text,
        session_id="s",
        num_turns=1,
        duration_ms=1,
        total_cost_usd=0.0,
        usage={},
    )


async def test_every_subscriber_gets_every_event_and_a_stalled_one_only_loses_its_own():
    broadcast = Broadcast(buffer=3)
    async with broadcast.subscribe() as fast, broadcast.subscribe() as stalled:
        for i in range(5):
            broadcast.on_event(_result(str(i)))
            with anyio.fail_after(5):
                assert (await fast.receive()).result == str(i)
        assert [(await stalled.receive()).result for _ in range(3)] == ["0", "1", "2"]
    assert broadcast.dropped == 2
    broadcast.on_event(_result("after"))  # nobody subscribed: nothing to do, nothing raised
