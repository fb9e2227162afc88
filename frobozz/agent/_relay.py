"""The event relay: one ordered log per session. Every event gets the next sequence number and is kept;
any number of followers read the same log in the same order, from any point (`after`, what a client last
saw), so a client that reconnects misses nothing.

With many instances, each has a relay per session it serves: on the instance that holds the session's lease
(`token` set) events are published, written to Postgres in order by one background task and only then
handed to the followers; on every other instance the relay is filled from the database (`sync`) when it is
told new events are there. So every follower on every instance reads the same numbers in the same order,
and an instance that dies takes nothing with it that a follower elsewhere had seen."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator
from itertools import chain

import anyio

from ._events import AgentEvent, Logged
from .exceptions import LeaseLostError

log = logging.getLogger("frobozz.agent.relay")
Persist = Callable[[list[Logged], int], Awaitable[None]]  # (batch, the lease's token)
RETRY_SECONDS = 1.0  # while the database is away, how often the relay tries again to write what it holds


class Relay:
    def __init__(
        self,
        history: list[Logged] | None = None,
        persist: Persist | None = None,
        on_lost: Callable[[], object] | None = None,
    ) -> None:
        self.log: list[Logged] = list(history or ())
        self._persist = persist
        self._on_lost = on_lost
        self.token: int | None = None if persist is not None else 0  # the lease this relay publishes under
        self._unsaved: list[Logged] = []
        self._in_flight: list[Logged] = []  # the batch being written now
        self._assigned = self.last_seq  # the last sequence number given out (written or on its way)
        self._flushing = False
        self._changed = anyio.Event()
        self._saving = anyio.Event()
        self.closed = False

    @property
    def last_seq(self) -> int:
        return self.log[-1].seq if self.log else 0

    def newest_first(self) -> Iterator[Logged]:
        """Every event published here, the newest first, written or still on its way (the log holds only those
        written): read from the end, as a session's state is, without copying a long log. An instance that no
        longer holds the session has only what was written (what it had on its way is not, by the holder's)."""
        if self.token is None:
            return reversed(self.log)
        return chain(reversed(self._unsaved), reversed(self._in_flight), reversed(self.log))

    @property
    def writing(self) -> bool:
        """Events published and not yet written (so not yet handed to the followers)."""
        return bool(self._unsaved) or self._flushing

    @property
    def owned(self) -> bool:
        return self.token is not None

    def publish(self, event: AgentEvent, token: int | None = None) -> Logged | None:
        """Add an event (None when this instance does not hold the session, or holds it under another lease
        than `token`, the one a driver was given: not its to say)."""
        if self.closed:
            raise RuntimeError("the relay is closed")
        if self.token is None or (token is not None and token != self.token):
            return None
        self._assigned = max(self._assigned, self.last_seq) + 1
        logged = Logged(seq=self._assigned, event=event)
        if self._persist is None:
            self._append([logged])
        else:
            self._unsaved.append(logged)
            self._saving.set()
        return logged

    def _append(self, batch: Iterable[Logged]) -> None:
        added = False
        for logged in batch:
            if logged.seq > self.last_seq:
                self.log.append(logged)
                added = True
        if added:
            self._changed.set()
            self._changed = anyio.Event()

    def sync(self, events: list[Logged]) -> None:
        """Events another instance wrote (ignored here while this one holds the session)."""
        if self.token is None and not self.closed:
            self._append(events)

    def take(self, token: int) -> None:
        """This instance holds the session now (its log caught up from the database first)."""
        self.token = token

    def drop(self) -> None:
        """The lease is gone: nothing more is published here, and what was not yet written never will be."""
        self.token = None
        self._unsaved = []
        self._in_flight = []  # (written under the lease let go: the state is read from what was written)
        self._assigned = self.last_seq

    def close(self, last: AgentEvent | None = None) -> None:
        """No more events (`last`, the session's end, shown to this instance's followers but not written):
        followers end once they have read everything."""
        if last is not None and not self.closed:
            self._append([Logged(seq=max(self._assigned, self.last_seq) + 1, event=last)])
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
        """Write new events to the store, in order, then hand them to the followers, until closed. While the
        database is away they are kept and tried again, so they are written (and followed) once it is back."""
        while not (self.closed and not self._unsaved):
            await self._saving.wait()
            self._saving = anyio.Event()
            batch, self._unsaved = self._unsaved, []
            token = self.token
            if batch and self._persist is not None and token is not None:
                self._flushing, self._in_flight = True, batch
                try:
                    await self._persist(batch, token)
                except LeaseLostError as e:
                    if self.token == token:  # (a lease given up meanwhile, or taken again since, is not lost now)
                        log.warning("%s", e)
                        self.drop()
                        if self._on_lost is not None:
                            self._on_lost()
                    continue
                except Exception as e:  # noqa: BLE001 - the live followers have them; a restart would not
                    if self.token != token:  # said under a lease let go meanwhile: not to be written under another
                        continue
                    if not self.closed:
                        log.warning(
                            "%d events not written to the database yet (tried again in %gs): %s",
                            len(batch),
                            RETRY_SECONDS,
                            e,
                        )
                        self._unsaved = batch + self._unsaved
                        await anyio.sleep(RETRY_SECONDS)
                        self._saving.set()
                        continue
                    log.error("%d events not written to the database: %s", len(batch), e)
                finally:
                    self._flushing, self._in_flight = False, []
                self._append(batch)
