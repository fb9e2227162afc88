"""Schedule: cron times in a zone (croniter) or every N seconds, the latest due time only, nothing twice."""

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from frobozz.engine.producers import MemoryDeliveries, ProducerError, Schedule
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "expression",
    ["", "* * * *", "61 * * * *", "* * * * * *", "@sometimes", "hello world", "* * * * * ; rm -rf /", "1" * 10_000],
)
def test_an_invalid_cron_expression_is_refused_with_what_a_valid_one_looks_like(expression):
    with pytest.raises(ProducerError, match=r"invalid cron expression.*5 fields"):
        Schedule("hi", cron=expression)


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_expression_for_a_day_no_month_has_is_refused_and_a_leap_day_is_not(expression):
    """Valid to croniter, it never comes: a worker looked for its next time every second, for ever."""
    with pytest.raises(ProducerError, match="never comes: no month has that day"):
        Schedule("hi", cron=expression)
    assert Schedule("hi", cron="0 0 29 2 *").next_after(datetime(2026, 11, 28, tzinfo=UTC)) == datetime(
        2028, 2, 29, tzinfo=UTC
    )


def test_an_unknown_time_zone_and_a_bad_interval_are_refused():
    with pytest.raises(ProducerError, match="unknown time zone"):
        Schedule("hi", cron="@daily", tz="Mars/Olympus")
    with pytest.raises(ProducerError, match="unknown time zone"):
        Schedule("hi", cron="@daily", tz="../../etc/passwd")
    for every in (0, -5, 10**12):
        with pytest.raises(ProducerError, match="every"):
            Schedule("hi", every=every)
    with pytest.raises(ProducerError, match="not both"):
        Schedule("hi", cron="@daily", every=5)
    with pytest.raises(ProducerError, match="not both"):
        Schedule("hi")
    with pytest.raises(ProducerError, match="prompt"):
        Schedule("  ", every=5)


def test_cron_times_are_in_the_schedule_s_zone_across_a_daylight_saving_change():
    lisbon = Schedule("brief", cron="30 7 * * *", tz="Europe/Lisbon")
    winter = lisbon.next_after(datetime(2026, 1, 10, 12, tzinfo=UTC))
    summer = lisbon.next_after(datetime(2026, 7, 10, 12, tzinfo=UTC))
    assert winter == datetime(2026, 1, 11, 7, 30, tzinfo=UTC)
    assert summer == datetime(2026, 7, 11, 6, 30, tzinfo=UTC)  # 07:30 WEST
    assert Schedule("x", cron="@hourly").next_after(datetime(2026, 1, 1, 5, 59, 59, tzinfo=UTC)) == datetime(
        2026, 1, 1, 6, tzinfo=UTC
    )


def test_every_n_seconds_counts_from_the_epoch_so_every_machine_agrees_and_only_the_latest_missed_time_fires():
    schedule = Schedule("x", every=7)
    after = datetime(2026, 1, 1, tzinfo=UTC)
    due = schedule.next_after(after)
    assert due.timestamp() % 7 == 0 and timedelta(0) < due - after <= timedelta(seconds=7)
    latest = schedule.latest_due(after, after + timedelta(seconds=100))
    assert latest is not None and latest.timestamp() % 7 == 0
    assert after + timedelta(seconds=93) < latest <= after + timedelta(seconds=100)
    assert schedule.latest_due(after, due - timedelta(seconds=1)) is None
    cron = Schedule("x", cron="*/5 * * * *")
    assert cron.latest_due(after, after + timedelta(minutes=23)) == after + timedelta(minutes=20)


class Turns:
    """A session's public face as a producer sees it: messages queued, a turn that ends."""

    def __init__(self):
        self.sent = []

    async def send(self, content):
        self.sent.append(content)

    async def wait_idle(self):
        pass


async def test_a_schedule_every_second_sends_its_prompt_at_each_due_time_once_and_marks_it_done_after_the_turn():
    deliveries = MemoryDeliveries()
    schedule = Schedule("What time is it?", every=1, deliveries=deliveries)
    session = Turns()
    with anyio.move_on_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(schedule.run, session)
            await eventually(lambda: len(session.sent) >= 2)
            tg.cancel_scope.cancel()
    assert session.sent[:2] == ["What time is it?"] * 2
    kept = deliveries.kept["schedule"]
    assert len(kept) >= 2 and all(datetime.fromisoformat(k).timestamp() % 1 == 0 for k in kept)
    assert await schedule.new([schedule.item(datetime.fromisoformat(k)) for k in kept]) == []
