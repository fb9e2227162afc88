"""The loop every routine producer shares: look for new items, send each as a message, wait for its
turn to end, and only then mark it done (so a crash in between delivers it again, never a finished one)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import anyio

from ..exceptions import EngineError
from ._items import Deliveries, Item, MemoryDeliveries, clean_text

if TYPE_CHECKING:
    from .._session import Session

log = logging.getLogger("frobozz.engine.producers")


class ProducerError(EngineError):
    """A producer's source cannot be read as asked (bad settings, a server that refuses or is not there)."""


def file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", key).strip("-.")[:120] or "item"


class PollingOptions(TypedDict, total=False):
    """What every polling producer takes besides its own arguments (passed on to Polling)."""

    deliveries: Deliveries | None
    interval: float
    files: Path | None


class Polling:
    """Base of Schedule, Feed and Inbox: `poll()` says what is new, `wait()` until it is time to look again."""

    name = "polling"

    def __init__(
        self,
        prompt: str,
        *,
        source: str,
        deliveries: Deliveries | None = None,
        interval: float = 60.0,
        files: Path | None = None,
    ) -> None:
        if not prompt.strip():
            raise ProducerError("a producer needs a prompt: what the model is to do with each item")
        if interval <= 0:
            raise ProducerError(f"the poll interval must be positive, not {interval:g}")
        self.prompt, self.source, self.interval = prompt, source, interval
        self.deliveries: Deliveries = deliveries if deliveries is not None else MemoryDeliveries()
        self.files = files

    async def poll(self) -> list[Item]:
        raise NotImplementedError

    async def wait(self) -> None:
        await anyio.sleep(self.interval)

    async def new(self, items: list[Item]) -> list[Item]:
        """The items not yet handled, in the order given."""
        done = await self.deliveries.done(self.source, [i.key for i in items])
        return [i for i in items if i.key not in done]

    def body_file(self, item: Item) -> str | None:
        """The item's full text written where the model may read it (context in files, not in prompts), its
        control characters out (a terminal that shows the file obeys none of the feed's or mail's)."""
        if item.body is None or self.files is None:
            return None
        self.files.mkdir(parents=True, exist_ok=True)
        path = self.files / f"{file_name(item.key)}.txt"
        path.write_text(clean_text(item.body), encoding="utf-8")
        return str(path)

    async def aclose(self) -> None:
        """Let go of what is kept between looks (an inbox's connections); nothing here."""

    async def run(self, session: Session) -> None:
        try:
            while True:
                try:
                    items = await self.poll()
                except ProducerError as e:
                    log.warning("%s %s: %s", self.name, self.source, e)
                    items = []
                for item in items:
                    if item.skipped:
                        log.warning("%s %s: item skipped: %s", self.name, self.source, item.skipped)
                    else:
                        await session.send(item.message(self.prompt, self.body_file(item)))
                        await session.wait_idle()  # its turn has ended (and been archived by the session's observers)
                    await self.deliveries.mark_done(self.source, item.key)
                await self.wait()
        finally:
            await self.aclose()
