"""Routines and their firings in real Postgres; the engine's Deliveries protocol kept there."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from frobozz.engine.producers import Feed, Schedule
from frobozz.routines import RoutineInputError, RoutineNotFoundError, RoutineStore, producer, routine
from tests.httpserver import serve

pytestmark = pytest.mark.anyio


async def test_on_nothing_there_are_no_routines_no_firings_and_nothing_delivered(store):
    assert await store.routines() == [] and await store.firings("none") == []
    assert await store.done("none", ["a", "b"]) == set() and await store.open_firings("none") == 0
    with pytest.raises(RoutineNotFoundError, match="no routine 'none'"):
        await store.get("none")
    for change in (store.remove("none"), store.set_paused("none", True)):
        with pytest.raises(RoutineNotFoundError):
            await change


async def test_a_routine_is_kept_listed_paused_and_removed_and_a_name_is_taken_once(store):
    spec = routine(name="brief", kind="cron", cron="30 7 * * *", tz="Europe/Lisbon", prompt="Brief me.")
    await store.add(spec)
    with pytest.raises(RoutineInputError, match="already"):
        await store.add(spec)
    (row,) = await store.routines()
    assert row["spec"] == spec and not row["paused"] and row["counts"] == {}
    await store.set_paused("brief", True)
    assert await store.routines(active=True) == [] and (await store.get("brief"))["paused"]
    await store.remove("brief")
    assert await store.routines() == []


async def test_a_cron_that_never_comes_and_the_scripted_model_are_refused_and_ones_stored_before_are_still_read(
    store,
):
    with pytest.raises(RoutineInputError, match="never comes"):
        routine(name="never", kind="cron", cron="0 0 31 2 *", prompt="Brief me.")
    with pytest.raises(RoutineInputError, match="scripted"):
        routine(name="offline", kind="every", every=60, prompt="Brief me.", model="scripted")
    never = routine(name="never", kind="cron", cron="0 0 28 2 *", prompt="Brief me.").model_dump()
    offline = routine(name="offline", kind="every", every=60, prompt="Brief me.").model_dump()
    for name, spec in (("never", {**never, "cron": "0 0 31 2 *"}), ("offline", {**offline, "model": "scripted"})):
        await store.pool.execute(  # as an older Frobozz stored it
            "INSERT INTO routines (name, spec) VALUES ($1, $2)", name, json.dumps(spec)
        )
    assert sorted((row["name"], row["spec"].cron, row["spec"].model) for row in await store.routines()) == [
        ("never", "0 0 31 2 *", None),
        ("offline", None, "scripted"),
    ]


async def test_a_feed_routine_added_before_first_reads_were_recorded_is_taken_as_read_once_by_the_upgrade(
    store, cortex_settings
):
    """Its feed was read already: what it holds unfired now came after (taken for its archive, it would be lost)."""
    await store.add(routine(name="news", kind="feed", url="https://example.org/atom.xml", prompt="x"))
    await store.add(routine(name="tick", kind="every", every=60, prompt="x"))
    await store.pool.execute("DELETE FROM routines_migrations WHERE version = 2")  # as it was before the upgrade
    upgraded = await RoutineStore.open(cortex_settings)
    try:
        assert not await upgraded.first_read("news", [("k1", "an undated entry")], "the archive")
        assert [(f["key"], f["state"]) for f in await upgraded.firings("news")] == [("first-read", "skipped")]
        assert await upgraded.firings("tick") == []
    finally:
        await upgraded.aclose()


async def test_an_item_is_delivered_only_once_its_firing_ended_and_a_key_is_claimed_once(store):
    await store.add(routine(name="news", kind="feed", url="http://127.0.0.1:1/feed", prompt="Read."))
    assert await store.claim("news", "k1", "first") and not await store.claim("news", "k1", "again")
    assert await store.done("news", ["k1"]) == set() and await store.open_firings("news") == 1
    await store.start("news", "k1", "20261124-080000-abcdef")
    assert await store.done("news", ["k1"]) == set()  # a crash now delivers it again
    await store.mark_done("news", "k1")
    assert await store.done("news", ["k1", "k2"]) == {"k1"} and await store.open_firings("news") == 0
    assert await store.claim("news", "k2", "too big", state="skipped", reason="over the limit")
    (newest, first) = await store.firings("news")
    assert (newest["state"], newest["reason"], first["state"]) == ("skipped", "over the limit", "done")


async def test_a_firing_taken_up_again_after_its_worker_died_was_running_while_that_worker_lived_and_not_after(
    store,
):
    """Taken up again, the firing's start was the re-take's: a moment while its first worker still ran it was
    judged not running (a due time then: 'missed', not 'overlap'). Nor is the worker's dead time running time."""
    await store.add(routine(name="t", kind="every", every=10, prompt="Note."))
    assert not await store.running_at("t", "other", datetime.now(UTC))  # no firings: nothing ran
    await store.claim("t", "k", "due")
    await store.start("t", "k", "20260101-000000-abcdef")  # by a worker that is killed -9 after it was last seen
    now = datetime.now(UTC)
    started, seen = now - timedelta(minutes=3), now - timedelta(minutes=2)
    await store.pool.execute("UPDATE routine_firings SET started = $1, alive = $2 WHERE key = 'k'", started, seen)
    await store.start("t", "k", None)  # taken up again by another worker
    taken = await store.firing("t", "k")
    assert taken["attempts"] == 2 and taken["started"] > seen
    ran, dead = started + timedelta(seconds=30), seen + timedelta(seconds=30)
    assert await store.running_at("t", "other", ran)  # its first worker ran it then
    assert not await store.running_at("t", "other", dead)  # its worker was dead, not yet taken up again
    assert not await store.running_at("t", "other", started - timedelta(seconds=1))  # before it started
    assert await store.running_at("t", "other", taken["started"] + timedelta(seconds=1))  # running again
    assert not await store.running_at("t", "k", ran)  # (a firing is not its own overlap)
    await store.finish("t", "k", "done", "finished")
    ended = (await store.firing("t", "k"))["ended"]
    assert await store.running_at("t", "other", ran) and not await store.running_at("t", "other", dead)
    assert not await store.running_at("t", "other", ended + timedelta(seconds=1))


async def test_the_feed_producer_remembers_through_postgres_across_instances(store):
    routes = {
        "/f": (
            200,
            b"<rss version='2.0'><channel><title>N</title><item><guid>1</guid><title>One</title>"
            b"</item></channel></rss>",
        )
    }
    await store.add(routine(name="f", kind="feed", url="http://127.0.0.1:1/f", prompt="Read."))
    with serve(routes) as url:
        (item,) = await Feed(f"{url}/f", "Read.", source="f", deliveries=store).poll()
        await store.claim("f", item.key, item.title)
        await store.mark_done("f", item.key)
        assert await Feed(f"{url}/f", "Read.", source="f", deliveries=store).poll() == []


@pytest.mark.parametrize(
    "values, error",
    [
        (dict(kind="cron", cron="61 * * * *"), "invalid cron expression"),
        (dict(kind="cron", cron="@daily", tz="Nowhere/Land"), "unknown time zone"),
        (dict(kind="every"), "--every needs"),
        (dict(kind="every", every=0), "greater than or equal to 1"),
        (dict(kind="inbox", url="imap://mail.example.org/INBOX"), "in the clear"),
        (dict(kind="inbox", url="imaps://u:pw@mail.example.org/INBOX"), "no password in the IMAP URL"),
        (dict(kind="feed", url="ftp://x"), "http:// or https://"),
        (dict(kind="cron", cron="@daily", prompt="   "), "prompt is empty"),
        (dict(kind="cron", cron="@daily", prompt=""), "at least 1 character"),
        (dict(kind="cron", cron="@daily", prompt="x" * 100_001), "at most 100000"),
        (dict(kind="cron", cron="@daily", name="../etc"), "name"),
        (dict(kind="cron", cron="@daily", name=""), "name"),
        (dict(kind="cron", cron="@daily", max_cost=-1), "max_cost"),
        (dict(kind="sometimes"), "kind"),
    ],
)
def test_bad_settings_are_one_clear_error(values, error):
    with pytest.raises(RoutineInputError, match=error):
        routine(**{"name": "r", "prompt": "Do it.", **values})


def test_a_routine_makes_its_producer_and_an_inbox_wants_its_password_from_where_it_names(monkeypatch, tmp_path):
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    schedule = producer(routine(name="r", kind="every", every=5, prompt="x"), None, created=now)
    assert isinstance(schedule, Schedule) and schedule.every == 5
    spec = routine(name="m", kind="inbox", url="imap://me@127.0.0.1:143/INBOX", prompt="x")
    monkeypatch.delenv("FROBOZZ_IMAP_PASSWORD", raising=False)
    with pytest.raises(RoutineInputError, match="set FROBOZZ_IMAP_PASSWORD"):
        producer(spec, None, created=now)
    monkeypatch.setenv("FROBOZZ_IMAP_PASSWORD", "s3cret")
    assert producer(spec, None, created=now).user == "me"
    missing = routine(
        name="m", kind="inbox", url="imap://me@127.0.0.1/", prompt="x", password_file=str(tmp_path / "none")
    )
    with pytest.raises(RoutineInputError, match="cannot be read"):
        producer(missing, None, created=now)
    assert "s3cret" not in spec.model_dump_json()
