import anyio
import anyio.lowlevel
import pytest

from frobozz._tasks import both, every, first_leaf, while_following

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


async def test_the_follower_runs_beside_the_request_and_stops_when_it_ends():
    polls: list[int] = []
    stopped = anyio.Event()
    polled = anyio.Event()

    async def follow():
        try:
            while True:
                polls.append(len(polls))
                polled.set()
                await anyio.lowlevel.checkpoint()
        finally:
            stopped.set()

    async def request():
        await polled.wait()
        return "image"

    assert await while_following(request, follow) == "image"
    assert polls and stopped.is_set()


async def test_the_requests_error_comes_out_plainly_from_while_following():
    async def fail():
        raise TimeoutError("the backend did not answer")

    with pytest.raises(TimeoutError, match="did not answer"):
        await while_following(fail, anyio.sleep_forever)


async def test_every_gives_each_result_in_the_order_asked_and_nothing_for_nothing():
    async def after(delay, value):
        await anyio.sleep(delay)
        return value

    assert await every([lambda: after(0.02, "a"), lambda: after(0, "b"), lambda: after(0.01, "c")]) == ["a", "b", "c"]
    assert await every([]) == []


def test_the_first_leaf_of_a_group_is_its_first_error_however_deep_and_an_error_is_its_own():
    inner = ValueError("what happened")
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [inner, KeyError("x")]), TypeError("later")])
    assert first_leaf(nested) is inner
    assert first_leaf(inner) is inner
