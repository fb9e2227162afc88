"""The second step of concurrent stores into one namespace goes as one call; each store returns once its own
memory is settled; a lone store waits for nobody. (Against Postgres, the word counts' tests store 40 memories
at once into one namespace and compare every memory's words in context with a rebuild.)"""

import anyio
import pytest

from frobozz.memory._settling import Settler

pytestmark = pytest.mark.anyio


class Recorder:
    """A settle that records its batches and holds each until let go (as a namespace's lock would)."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[int]]] = []
        self.started = anyio.Event()
        self.go = anyio.Event()
        self.hold = True

    async def __call__(self, namespace: str, ids: list[int]) -> None:
        self.batches.append((namespace, list(ids)))
        self.started.set()
        if self.hold:
            await self.go.wait()


async def test_a_lone_store_is_settled_at_once_by_itself():
    recorder = Recorder()
    recorder.hold = False
    settler = Settler(recorder)
    with anyio.fail_after(10):
        await settler.settle("ns", 1)
        await settler.settle("ns", 2)
    assert recorder.batches == [("ns", [1]), ("ns", [2])]
    assert settler._namespaces == {}  # nothing kept for a namespace nobody is storing into


async def test_stores_arriving_while_one_settles_go_together_next_and_each_returns_once_its_own_is_settled():
    recorder = Recorder()
    settler = Settler(recorder)
    returned: list[int] = []

    async def store(memory_id: int) -> None:
        await settler.settle("ns", memory_id)
        returned.append(memory_id)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store, 1)
            await recorder.started.wait()  # the first settles alone; three more come meanwhile
            for memory_id in (2, 3, 4):
                tg.start_soon(store, memory_id)
            await anyio.wait_all_tasks_blocked()
            assert returned == [] and recorder.batches == [("ns", [1])]
            recorder.hold = False
            recorder.go.set()
    assert recorder.batches == [("ns", [1]), ("ns", [2, 3, 4])]
    assert sorted(returned) == [1, 2, 3, 4] and returned[0] == 1


async def test_namespaces_settle_apart_and_do_not_wait_for_each_other():
    recorder = Recorder()
    settler = Settler(recorder)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(settler.settle, "a", 1)
            await recorder.started.wait()
            with anyio.fail_after(5):  # "a" is held; "b" is not behind it
                recorder.hold = False
                await settler.settle("b", 2)
            recorder.go.set()
    assert sorted(recorder.batches) == [("a", [1]), ("b", [2])]


async def test_a_store_cancelled_while_it_waits_still_has_its_memory_settled_with_its_batch():
    recorder = Recorder()
    settler = Settler(recorder)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(settler.settle, "ns", 1)
            await recorder.started.wait()
            tg.start_soon(settler.settle, "ns", 2)
            tg.start_soon(settler.settle, "ns", 3)
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()  # every store is cancelled mid-wait: their memories are stored already
            recorder.hold = False
            recorder.go.set()
    assert recorder.batches == [("ns", [1]), ("ns", [2, 3])]


async def test_a_settle_that_raises_releases_its_batch_and_the_error_reaches_its_leader_only():
    calls: list[list[int]] = []
    go = anyio.Event()

    async def failing(namespace: str, ids: list[int]) -> None:
        calls.append(ids)
        await go.wait()
        raise RuntimeError("the database went away")

    settler = Settler(failing)
    outcomes: dict[int, str] = {}

    async def store(memory_id: int) -> None:
        try:
            await settler.settle("ns", memory_id)
            outcomes[memory_id] = "returned"
        except RuntimeError:
            outcomes[memory_id] = "raised"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store, 1)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(store, 2)
            tg.start_soon(store, 3)
            await anyio.wait_all_tasks_blocked()
            go.set()
    assert calls == [[1], [2, 3]]
    assert outcomes == {1: "raised", 2: "raised", 3: "returned"}
    assert settler._namespaces == {}
