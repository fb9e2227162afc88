"""What a worker's look puts on the queue: new feed entries one at a time, oldest first, none twice; and
sources that cannot be read (a refused login, no server, a feed that is not XML) recorded on the routine
while the worker goes on (real Postgres, a real HTTP server, a real IMAP server)."""

import anyio
import pytest

from frobozz.routines import RoutineSettings, RoutineWorker, routine
from tests.httpserver import serve
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


def rss(*items):
    body = "".join(f"<item><guid>{i}</guid><title>{t}</title><pubDate>{d}</pubDate></item>" for i, t, d in items)
    return f"<rss version='2.0'><channel><title>N</title>{body}</channel></rss>".encode()


OLD = ("1", "Old", "Mon, 05 Jan 2026 08:00:00 GMT")
NEW = [("2", "New one", "Wed, 24 Nov 2027 08:00:00 GMT"), ("3", "New two", "Wed, 24 Nov 2027 09:00:00 GMT")]


async def test_a_feed_s_new_entries_are_queued_one_at_a_time_oldest_first_and_none_twice(
    store, ledger, routine_settings
):
    routes = {"/f": (200, rss(OLD))}
    with serve(routes) as url:
        await store.add(routine(name="news", kind="feed", url=f"{url}/f", poll=1, prompt="Summarise."))
        worker = RoutineWorker(store, ledger, routine_settings)

        async def look():
            worker._next_look.clear()
            await worker.look(await store.get("news"))
            return [(f["title"], f["state"]) for f in await store.firings("news")]

        first = ("the feed read for the first time", "skipped")
        assert await look() == [first]  # the archive from before the routine: none of it fired
        routes["/f"] = (200, rss(*NEW, OLD))
        assert await look() == [("New one", "queued"), first]
        assert await look() == [("New one", "queued"), first]  # one at a time
        await store.mark_done("news", (await store.firings("news"))[0]["key"])
        assert await look() == [("New two", "queued"), ("New one", "done"), first]
        await store.mark_done("news", (await store.firings("news"))[0]["key"])
        assert await look() == [("New two", "done"), ("New one", "done"), first]
        await worker.memory.aclose()


async def test_sources_that_cannot_be_read_are_recorded_on_their_routines_and_the_worker_goes_on(
    store, ledger, routine_settings, imap_server, monkeypatch
):
    user, _ = imap_server.add_user()
    monkeypatch.setenv("FROBOZZ_IMAP_PASSWORD", "not-the-password")
    with serve({"/page": (200, b"<html>no feed here</html>")}) as url:
        await store.add(routine(name="refused", kind="inbox", url=imap_server.url(user), prompt="x", poll=1))
        await store.add(routine(name="nobody", kind="inbox", url="imap://me@127.0.0.1:9/INBOX", prompt="x", poll=1))
        await store.add(routine(name="page", kind="feed", url=f"{url}/page", prompt="x", poll=1))
        worker = RoutineWorker(store, ledger, RoutineSettings(routine_tick=0.2))
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            with anyio.fail_after(120):

                async def ready() -> object:
                    return all(r["problem"] for r in await store.routines())

                await eventually(ready, interval=0.1)
            worker.stop()
        await worker.memory.aclose()
    problems = {r["name"]: r["problem"] for r in await store.routines()}
    assert "refused the login" in problems["refused"] and "not-the-password" not in problems["refused"]
    assert "is not there" in problems["nobody"] and "not an RSS or Atom feed" in problems["page"]
    for name in problems:
        assert await store.firings(name) == []
