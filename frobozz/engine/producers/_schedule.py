"""Schedule: a prompt at cron times (5 fields or @hourly/@daily…, in a time zone) or every N seconds.

croniter parses and steps the expressions (it is what pgqueuer's own scheduler uses, and it steps
across daylight-saving changes in a zone); every-N-seconds times are multiples of N since the Unix
epoch, so every machine computes the same due times."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Unpack
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
from croniter import CroniterBadDateError, croniter

from ._items import Item
from ._polling import Polling, PollingOptions, ProducerError

KEYWORDS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def zone(name: str) -> ZoneInfo:
    """The IANA time zone of this name (ProducerError, with an example, for one that does not exist)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as e:
        raise ProducerError(f"unknown time zone {name[:60]!r} (use an IANA name such as Europe/Lisbon)") from e


def check_cron(expression: str, *, comes: bool = True) -> str:
    """The expression, if it is 5 cron fields or one of the @ keywords, and (`comes`) comes some day: a valid one
    can name a date that no month has (`0 0 31 2 *`), which a worker would look for again and again."""
    text = " ".join((expression or "").split())
    if text.lower() in KEYWORDS:
        return text.lower()
    if len(text.split()) != 5 or not croniter.is_valid(text):
        raise ProducerError(
            f"invalid cron expression {text[:80]!r}: use 5 fields (minute hour day month weekday), "
            f"such as '30 7 * * 1-5', or one of {', '.join(KEYWORDS)}"
        )
    if comes:
        try:
            croniter(text, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)  # a leap year's 29 February is due
        except CroniterBadDateError:
            raise ProducerError(f"the cron expression {text[:80]!r} never comes: no month has that day") from None
    return text


class Schedule(Polling):
    """`Schedule("Brief me.", cron="30 7 * * *", tz="Europe/Lisbon")` or `Schedule("Check.", every=300)`."""

    name = "schedule"

    def __init__(
        self,
        prompt: str,
        *,
        cron: str | None = None,
        tz: str = "UTC",
        every: float | None = None,
        source: str = "schedule",
        start: datetime | None = None,
        **kwargs: Unpack[PollingOptions],
    ) -> None:
        super().__init__(prompt, source=source, **kwargs)
        if (cron is None) == (every is None):
            raise ProducerError("a schedule has either a cron expression or an interval in seconds, not both")
        if every is not None and not (1 <= every <= 366 * 86400):
            raise ProducerError(f"every {every:g} s: give between 1 second and a year")
        self.cron = None if cron is None else check_cron(cron)
        self.every, self.zone = every, zone(tz)
        self.last = start or datetime.now(UTC)  # the due time last handled (or the start)

    def next_after(self, moment: datetime) -> datetime:
        """The first due time strictly after `moment` (aware, in UTC)."""
        if self.every is not None:
            stamp = moment.timestamp()
            return datetime.fromtimestamp((math.floor(stamp / self.every) + 1) * self.every, UTC)
        assert self.cron is not None  # __init__ sets exactly one of cron and every
        local = moment.astimezone(self.zone)
        return croniter(self.cron, local).get_next(datetime).astimezone(UTC)

    def latest_due(self, after: datetime, now: datetime) -> datetime | None:
        """The last due time in (after, now]: the earlier ones a stopped machine missed are not made up."""
        due = self.next_after(after)
        if due > now:
            return None
        if self.every is not None:
            return datetime.fromtimestamp(math.floor(now.timestamp() / self.every) * self.every, UTC)
        while (following := self.next_after(due)) <= now:
            due = following
        return due

    @staticmethod
    def key(due: datetime) -> str:
        return due.astimezone(UTC).isoformat(timespec="seconds")

    def item(self, due: datetime) -> Item:
        return Item(source=self.source, key=self.key(due), title=f"due {self.key(due)}", at=due)

    async def poll(self) -> list[Item]:
        due = self.latest_due(self.last, datetime.now(UTC))
        if due is None:
            return []
        self.last = due
        return await self.new([self.item(due)])

    async def wait(self) -> None:
        delay = (self.next_after(self.last) - datetime.now(UTC)) / timedelta(seconds=1)
        await anyio.sleep(max(delay, 0.0) + 0.01)
