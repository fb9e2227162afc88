import anyio
import pytest

from frobozz._tasks import both

pytestmark = pytest.mark.anyio


async def test_both_results_come_back_in_order():
    async def slow():
        await anyio.sleep(0.01)
        return "first"

    async def fast():
        return "second"

    assert await both(slow, fast) == ("first", "second")


async def test_the_first_error_comes_out_plainly_and_stops_the_other():
    stopped = anyio.Event()

    async def forever():
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()

    async def fail():
        raise KeyError("no such memory")

    with pytest.raises(KeyError, match="no such memory"):
        await both(forever, fail)
    assert stopped.is_set()
