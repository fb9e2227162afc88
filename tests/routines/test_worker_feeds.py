"""A worker's feeds: one that never finishes its answer holds up no other and fails at its deadline, saying so;
undated entries already in a feed when its routine is added are recorded, not fired (real Postgres, real HTTP
servers on loopback)."""

import threading

import anyio
import pytest

from frobozz.routines import RoutineSettings, RoutineWorker, routine
from frobozz.routines._worker import READS_AT_ONCE
from tests.engine.producers.trickle import trickling
from tests.httpserver import serve
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def rss(*titles):
    body = "".join(f"<item><guid>{t}</guid><title>{t}</title></item>" for t in titles)  # no dates
    return f"<rss version='2.0'><channel><title>N</title>{body}</channel></rss>".encode()


class Counted(dict):
    """A server's routes that count how often the feed was asked for."""

    reads = 0

    def get(self, *args):
        self.reads += 1
        return super().get(*args)


async def test_a_feed_that_never_finishes_its_answer_holds_up_no_other_feed_and_its_problem_is_recorded(
    store, ledger, routine_settings
):
    routes = Counted({"/f": (200, rss())})
    with trickling() as trickle, serve(routes) as url:
        await store.add(routine(name="a-slow", kind="feed", url=trickle.url, poll=1, prompt="x"))
        await store.add(routine(name="b-quick", kind="feed", url=f"{url}/f", poll=1, prompt="x"))
        settings = RoutineSettings(routine_tick=0.2, routine_warm=0, routine_read_timeout=10)
        worker = RoutineWorker(store, ledger, settings)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            with anyio.fail_after(60):
                await eventually(lambda: trickle.started == 1)  # the slow feed's answer has begun, and goes on
                reads = routes.reads
                await eventually(lambda: routes.reads >= reads + 2)
                assert trickle.started == 1 and trickle.ended == 0  # read twice while the slow one's answer went on

                async def slow_failed() -> object:
                    return (await store.get("a-slow"))["problem"]

                await eventually(slow_failed, interval=0.2)
            worker.stop()
        await worker.memory.aclose()
    assert "no whole answer within 10 s" in (await store.get("a-slow"))["problem"]
    assert (await store.get("b-quick"))["problem"] is None


async def test_undated_entries_already_in_a_feed_are_recorded_unfired_and_only_later_ones_fire(
    store, ledger, routine_settings
):
    """The first read, by any worker, takes the feed's undated entries for its archive (they fired one after
    another, 21 sessions here); it is recorded, so a worker started later, or again, takes no read of its own
    for a first one (an entry that came meanwhile would be lost)."""
    routes = {"/f": (200, rss(*(f"ok {n}" for n in range(20, -1, -1)))), "/empty": (200, rss())}
    first_read = ("the feed read for the first time", "skipped")
    with serve(routes) as url:
        await store.add(routine(name="fresh", kind="feed", url=f"{url}/f", poll=1, prompt="x"))
        await store.add(routine(name="empty", kind="feed", url=f"{url}/empty", poll=1, prompt="x"))
        worker = RoutineWorker(store, ledger, routine_settings)

        async def look(name, by=worker):
            by._next_look.clear()
            await by.look(await store.get(name))
            return [(f["title"], f["state"]) for f in await store.firings(name, limit=1000)]

        first = await look("fresh")
        assert len(first) == 22 and {state for _, state in first} == {"skipped"} and first_read in first
        assert await look("fresh") == first  # nothing fired from the feed's archive
        routes["/f"] = (200, rss(*(f"ok {n}" for n in range(21, -1, -1))))
        assert (await look("fresh"))[0] == ("ok 21", "queued")
        assert await look("empty") == [first_read]  # a feed with nothing yet
        routes["/empty"] = (200, rss("first"))
        another = RoutineWorker(store, ledger, routine_settings)  # (or this one, restarted)
        assert await look("empty", by=another) == [("first", "queued"), first_read]
        await worker.memory.aclose()
        await another.memory.aclose()


class Gated(dict):
    """A server's routes whose answers wait until the test lets them go (`go`); `asked` is set once asked."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.asked, self.go = threading.Event(), threading.Event()

    def get(self, *args):
        self.asked.set()
        self.go.wait(60)
        return super().get(*args)


async def test_a_feed_routine_removed_while_its_feed_is_read_leaves_the_worker_looking_on(
    store, ledger, routine_settings
):
    """The look goes on after the read (the first read recorded, an entry queued) against a routine that is gone:
    Postgres refuses those rows, an error taken for the database's going away, which restarted the worker's
    looks (every routine's), now that reads run beside each other and outlive a removal more often."""
    routes = Gated({"/f": (200, rss("one"))})
    with serve(routes) as url:
        await store.add(routine(name="gone", kind="feed", url=f"{url}/f", poll=1, prompt="x"))
        worker = RoutineWorker(store, ledger, routine_settings)
        row = await store.get("gone")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker._look, row, tg)
                with anyio.fail_after(30):
                    await eventually(routes.asked.is_set)
                await store.remove("gone")
                routes.go.set()
        finally:
            routes.go.set()
            await worker.memory.aclose()
    assert await store.routines() == []


class Crowded(Gated):
    """Gated routes that count the requests in flight at once (and the most there were)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.lock, self.in_flight, self.most, self.answered = threading.Lock(), 0, 0, 0

    def get(self, *args):
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            return super().get(*args)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.answered += 1


async def test_a_worker_reads_a_bounded_number_of_feeds_at_once_and_the_others_after(store, ledger):
    """Each feed is read in its own task (a slow one holds up none), but not all at once: a thousand feeds
    were a thousand fetches, each wanting one of the store's few connections."""
    many = READS_AT_ONCE + 4
    routes = Crowded({"/f": (200, rss())})
    with serve(routes) as url:
        for n in range(many):
            await store.add(routine(name=f"feed-{n}", kind="feed", url=f"{url}/f", poll=600, prompt="x"))
        worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.2, routine_warm=0))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.run)
                with anyio.fail_after(60):
                    await eventually(
                        lambda: (
                            routes.in_flight == READS_AT_ONCE
                            and worker._reads.statistics().tasks_waiting == many - READS_AT_ONCE
                        )
                    )
                    routes.go.set()
                    await eventually(lambda: routes.answered == many)  # then the others, each read once
                worker.stop()
        finally:
            routes.go.set()
            await worker.memory.aclose()
    assert routes.most == READS_AT_ONCE
