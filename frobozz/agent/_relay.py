"""The event relay: one ordered log per session. Every event gets the next sequence number and is kept;
any number of followers read the same log in the same order, from any point (`after`, what a client last
saw), so a client that reconnects misses nothing. The log is written to Postgres in order by one
background task, off the path to the followers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection

import anyio

from ._events import AgentEvent, Logged

log = logging.getLogger("frobozz.agent.relay")
Persist = Callable[[list[Logged]], Awaitable[None]]
RETRY_SECONDS = 1.0  # while the database is away, how often the relay tries again to write what it holds


class Relay:
    def __init__(self, history: list[Logged] | None = None, persist: Persist | None = None) -> None:
        self.log: list[Logged] = list(history or ())
        self._persist = persist
        self._unsaved: list[Logged] = []
        self._changed = anyio.Event()
        self._saving = anyio.Event()
        self.closed = False

    @property
    def last_seq(self) -> int:
        return self.log[-1].seq if self.log else 0

    def publish(self, event: AgentEvent) -> Logged:
        if self.closed:
            raise RuntimeError("the relay is closed")
        logged = Logged(seq=self.last_seq + 1, event=event)
        self.log.append(logged)
        self._unsaved.append(logged)
        self._changed.set()
        self._changed = anyio.Event()
        self._saving.set()
        return logged

    def close(self) -> None:
        """No more events: followers end once they have read everything."""
        self.closed = True
        self._changed.set()
        self._saving.set()

    async def follow(self, after: int = 0, kinds: Collection[str] | None = None) -> AsyncIterator[Logged]:
        """Every event after sequence number `after`, then each new one as it comes, until the relay closes."""
        index = next((i for i, e in enumerate(self.log) if e.seq > after), len(self.log))
        while True:
            while index < len(self.log):
                logged = self.log[index]
                index += 1
                if kinds is None or logged.event.kind in kinds:
                    yield logged
            if self.closed:
                return
            await self._changed.wait()

    async def keep(self) -> None:
        """Write new events to the store, in order, until closed (then what is left). While the database is
        away they are kept and tried again, so they are written once it is back."""
        while True:
            await self._saving.wait()
            self._saving = anyio.Event()
            batch, self._unsaved = self._unsaved, []
            if batch and self._persist is not None:
                try:
                    await self._persist(batch)
                except Exception as e:  # noqa: BLE001 - the live followers have them; a restart would not
                    if self.closed:
                        log.error("%d events not written to the database: %s", len(batch), e)
                        return
                    log.warning("%d events not written to the database yet (tried again in %gs): %s",
                                len(batch), RETRY_SECONDS, e)
                    self._unsaved = batch + self._unsaved
                    await anyio.sleep(RETRY_SECONDS)
                    self._saving.set()
                    continue
            if self.closed and not self._unsaved:
                return
