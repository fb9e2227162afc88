"""Where a session's claude runs. Among instances, on the one that holds the session's lease (`_leases`): a
session is claimed here when no instance runs it and there is room, its lease renewed while this instance lives,
given up when it idles, handed over at shutdown, and let go at once when another instance has taken it. On this
instance, room under --max-live: each claude is counted (a memory session's sidecars too, and the warm spare,
which waits while a session wants room and is the first to go for it), the least recently used idle session is
let go for a new one, and an idle claude is released after --idle-timeout. A session held here has what other
instances accepted for it pumped from its inbox to its claude; one followed from here has the events its holder
wrote synced into it.

The `Agent` owns one: the sessions are the Agent's (`live`, loaded through `load`); this decides where they run."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
from anyio.abc import TaskGroup

from frobozz.engine import WarmSpare
from frobozz.memory import DatabaseError

from ._events import Error, Status
from ._leases import Leases
from ._session import AgentSession
from ._store import AgentStore
from .exceptions import AgentError
from .settings import AgentSettings

log = logging.getLogger("frobozz.agent")


class Placement:
    """Where the sessions this instance serves run their claude (see the module)."""

    def __init__(
        self, settings: AgentSettings, live: dict[str, AgentSession], load: Callable[[str], Awaitable[AgentSession]]
    ) -> None:
        self.settings = settings
        self.live = live  # the Agent's: every session this instance serves (held or followed)
        self.load = load  # a session by its id, loaded from the database when this instance does not serve it yet
        self.leases: Leases | None = None  # (`start`: once the service's database is open)
        self.store: AgentStore | None = None
        self._tg: TaskGroup | None = None
        self._syncing: dict[str, anyio.Lock] = {}
        self._claiming: dict[str, anyio.Lock] = {}  # a session's claims one at a time (`claim`)
        self._claims = anyio.Event()  # look for sessions that need an instance now (`look_for_claims`)
        self._renew_now = anyio.Event()  # and renew now
        self._renewed_at = 0.0  # when the last renewal that came back was asked for (`start`: when it started)
        self._closing = False  # shutting down: sessions handed over are not taken up again here
        self._wanting_room = 0  # sessions in _acquire: a spare waits while they do (it would take their room)
        # when (anyio's clock) a lease may lapse unless renewed, by session id (it is let go here then: `fence`),
        # and by token for the claims under way (renewed with the sessions held here)
        self._lease_until: dict[str, float] = {}
        self._taking: dict[int, float] = {}
        self._handing: set[int] = set()  # tokens of sessions handed over at shutdown, renewed while claude closes
        self._deadline_added = anyio.Event()  # the fence looks again (a claim's deadline may come before its next look)
        # the next claude, started ahead of need; it counts under max_live and is the first to go for room
        self.spare = WarmSpare(room=self._room_for_spare) if settings.warm_spare else None

    def start(self, leases: Leases, store: AgentStore, task_group: TaskGroup) -> None:
        """The service's database is open: leases taken and given up through `leases`, tasks run in `task_group`
        (the service's; the caller starts `reap_idle`, `keep_leases`, `look_around` and `fence` in it)."""
        self.leases, self.store, self._tg = leases, store, task_group
        self._renewed_at = anyio.current_time()

    def look_for_claims(self) -> None:
        """Look around now (`look_around`), and renew (`keep_leases`): the listener calls this each time it listens
        again, as notices of sessions to take up, or taken over, may have been missed while it was not listening."""
        self._claims.set()
        self._renew_now.set()

    async def hand_over_all(self) -> None:
        """At shutdown: no session is taken up here any more, and every one held here is handed over."""
        self._closing = True
        async with anyio.create_task_group() as tg:  # all at once, within one bound
            for session in [s for s in self.live.values() if s.owned]:
                tg.start_soon(self._hand_over, session)

    async def _hand_over(self, session: AgentSession) -> None:
        """At shutdown: a held session's claudes closed (within the bound), then its lease handed over at once,
        so the next instance takes its turn over; a claude still running keeps the lease until it lapses
        (no other instance resumes a transcript that is still being written), and is stopped with the tg.
        A turn under way is cut short, its claude stopped at once: nothing it would still say is kept here (the
        session is disowned first), so letting it finish (a tool that runs on, a long answer) would only hold the
        lease, and the next instance's answer, up; that instance answers the message again, as after a kill -9."""
        token = session.relay.token
        mid_turn = session.mid_turn  # (asked while it is held: once disowned, it reads as the log says)
        session.disown()  # nothing more said here
        if mid_turn:
            session.cut_short()
        handing = {token} if token is not None else set()
        self._handing |= handing  # (renewed while its claude closes)
        try:
            closed = await session.release(self.settings.shutdown_timeout)
        finally:
            self._handing -= handing
        if not closed:
            log.warning(
                "session %s: its claude did not close within %g s: stopped, its lease left to lapse",
                session.id,
                self.settings.shutdown_timeout,
            )
        elif token is not None and self.leases is not None:
            try:
                with anyio.move_on_after(5):
                    await self.leases.release(session.id, token, force=True)
            except DatabaseError as e:
                log.warning("session %s: its lease is not handed over (%s); it lapses", session.id, e)

    # -- room on this instance -------------------------------------------------------------------------
    async def _acquire(self, session: AgentSession) -> None:
        """Room for one more claude: past --max-live, the least recently used idle one is let go first."""
        need = min(session.claudes, self.settings.max_live)  # a session bigger than the bound runs alone
        self._wanting_room += 1
        try:
            await self._room_for(session, need)
        finally:
            self._wanting_room -= 1
        session.reserved = True

    async def _room_for(self, session: AgentSession, need: int) -> None:
        while True:  # no await between the last check and the reservation: two sessions cannot both pass
            if self._claudes() + need > self.settings.max_live:
                idle = [s for s in self.live.values() if s.engine is not None and not s.busy and s is not session]
                if idle:
                    await self._let_go(min(idle, key=lambda s: s.last_used))
                else:
                    await anyio.sleep(0.05)  # every claude is mid-turn: wait for one to finish
                continue
            spare = self.spare
            if spare is not None and spare.live and self._claudes() + need + spare.live > self.settings.max_live:
                options = session.launch_options()
                if options is None or not spare.fits(options):  # not this session's: it goes first, and is gone
                    await spare.clear()  # before this session's claude starts
                    continue
            return

    def _room_for_spare(self) -> bool:
        """A spare counts under --max-live, and waits while a session wants room."""
        return not self._wanting_room and self._claudes() + 1 <= self.settings.max_live

    def _claudes(self) -> int:
        """claude processes the live sessions hold or are starting (the spare's not among them)."""
        return sum(s.claudes for s in self.live.values() if s.engine is not None or s.reserved)

    async def reap_idle(self) -> None:
        every = max(0.05, min(5.0, self.settings.idle_timeout / 4))
        while True:
            await anyio.sleep(every)
            now = anyio.current_time()
            for session in list(self.live.values()):
                if (
                    session.engine is not None
                    and not session.busy
                    and now - session.last_used > self.settings.idle_timeout
                ):
                    log.info("session %s idle for %.0f s: its claude is released", session.id, now - session.last_used)
                    await self._let_go(session)

    # -- among instances -------------------------------------------------------------------------------
    async def _let_go(self, session: AgentSession) -> None:
        """Release the session's claude, and its lease unless messages wait (the next message, on any instance,
        takes it up again)."""
        assert self.leases is not None
        token = session.relay.token
        if token is not None and not session.busy:
            gone = False
            try:
                with anyio.move_on_after(5):
                    gone = await self.leases.release(session.id, token)
            except DatabaseError as e:
                log.warning("session %s: its lease is not given up (%s); it expires", session.id, e)
            if session.relay.token != token:  # lost, or taken up again here, meanwhile: not this call's to let go
                return
            if gone:
                session.disown()
            elif session.busy:  # a message came meanwhile: its turn wants the claude
                return
        await session.release()

    def lost(self, session: AgentSession) -> None:
        """Another instance holds the session now: this one stops running it (its followers stay)."""
        log.warning("session %s: the lease was lost; another instance runs it now", session.id)
        self._stop_running(session)

    def _stop_running(self, session: AgentSession) -> None:
        """Its claude stopped at once, mid-turn or not: the turn under way is the next holder's to answer."""
        self._lease_until.pop(session.id, None)
        session.disown()
        session.stop_driving()
        session.cut_short()  # (now: whichever release comes first stops its claude at once, not gently)
        assert self._tg is not None
        self._tg.start_soon(session.release)
        self._tg.start_soon(self._catch_up, session)

    async def _catch_up(self, session: AgentSession) -> None:
        """A session let go, followed from here now: what its new holder wrote meanwhile, read at once (its
        notices came while it was held here, and went unread); else at the next look around."""
        try:
            await self.sync(session)
        except DatabaseError as e:
            log.info("session %s: its events are caught up at the next look around (%s)", session.id, e)

    def lapsed(self, session: AgentSession) -> None:
        """This instance could not renew the session's lease in time (its database slow or unreachable): from now
        another instance may take the session over, so it is let go here first, as if lost. Its lease is not
        renewed again; the message in hand is answered again by whichever instance takes the session up."""
        log.warning(
            "session %s: its lease was not renewed within %g s (the database is slow or unreachable); its claude "
            "is stopped, as another instance may take the session over",
            session.id,
            self.settings.lease_ttl,
        )
        self._stop_running(session)

    def _room(self) -> bool:
        """Room here under --max-live for one more session's turn (idle claudes can be let go)."""
        running = sum(s.claudes for s in self.live.values() if s.owned and (s.busy or s.reserved))
        return running + 1 <= self.settings.max_live

    async def claim(self, session_id: str) -> None:
        """Run the session here when no instance does and there is room: catch its log up, say that a turn cut
        short elsewhere was taken over, and answer what waits in its inbox."""
        # One claim of a session at a time: a message's poster returns only once the claim its own notice started
        # is through (the session run here, its message queued), not while it is under way, when the session
        # looked idle to anyone asking (agentapi's status said stable with three messages posted)
        lock = self._claiming.setdefault(session_id, anyio.Lock())
        try:
            async with lock:
                await self._claim_here(session_id)
        finally:
            if not lock.locked() and self._claiming.get(session_id) is lock:  # none holds it, none waits for it
                del self._claiming[session_id]  # (kept, every session ever heard of would stay here)

    async def _claim_here(self, session_id: str) -> None:
        assert self.leases is not None and self.store is not None and self._tg is not None
        token: int | None = None
        try:
            if self._closing or not self._room():  # closing: its own hand-over's notice must not take it back
                return
            if anyio.current_time() - self._renewed_at > self.settings.lease_ttl:  # it could not keep the lease
                log.info("session %s not taken up here: this instance's leases are not being renewed", session_id)
                return
            asked = anyio.current_time()  # (the lease's expiry is counted from a moment after this one)
            token = await self.leases.acquire(session_id)
            if token is None:
                return
            self._taking[token] = asked + self.settings.lease_ttl
            session = await self.load(session_id)
            if session.owned:  # an older lease of ours that lapsed before the fence let it go
                log.warning("session %s: its lease lapsed before this instance let it go; taken again", session_id)
                self._stop_running(session)
            await session.release()  # the claude of an earlier lease here (lost just now, say) gone: not resumed
            await session.driven()  # and its driver (the two would share the session's state)
            record = await self.store.get(session_id)
            if record is None:
                return
            session.record = record
            await self.sync(session)
            # its next call is numbered after the last logged (by any instance; the log held here counts on)
            session.tool_base = await self.store.last_tool_call(session_id) - len(session.tool_log.calls)
            session.inbox_after = 0
            if self._taking[token] <= anyio.current_time():  # the fence would let it go at once: another may have it
                raise AgentError(f"its claim took longer than a lease lasts ({self.settings.lease_ttl:g} s)")
            session.claim(token, self._acquire, self._tg)
            self._lease_until[session_id] = self._taking.pop(token)
            self._deadline_added.set()
            token = None  # the session's now: its driver lets the lease go
            if session.state in ("streaming", "waiting"):
                log.warning("session %s: its turn was cut short on another instance; taken over", session_id)
                session.relay.publish(
                    Error(
                        message="the instance running this turn stopped; another instance took "
                        "the session over and answers the message again"
                    )
                )
                session.relay.publish(Status(state="idle"))
            await self.pump(session)
        except (AgentError, DatabaseError) as e:
            log.warning("session %s not taken up here: %s", session_id, e)
        finally:
            if token is not None:  # taken, then the claim failed: given up, or it lapses (it is not renewed)
                self._taking.pop(token, None)
                self._tg.start_soon(self._give_up_lease, session_id, token)

    async def _give_up_lease(self, session_id: str, token: int, *, pause: bool = True) -> None:
        """The lease of a claim that failed, given up after a pause: its notice starts the next claim (here or
        elsewhere), and a failure that persists is not tried again at once, over and over. Or, with no pause,
        one this instance let go while a renewal of it was under way, which renewed it."""
        assert self.leases is not None
        if pause:
            await anyio.sleep(self.settings.lease_ttl / 3)  # (at shutdown, cancelled: the lease lapses with the rest)
        try:
            with anyio.move_on_after(self.settings.lease_ttl):
                await self.leases.release(session_id, token, force=True)
        except DatabaseError as e:
            log.warning("session %s: the lease of a failed claim not given up (it lapses): %s", session_id, e)

    async def pump(self, session: AgentSession) -> None:
        """Hand the driver what waits in the session's inbox, in the order it was accepted."""
        assert self.leases is not None
        async with self._syncing.setdefault(f"inbox:{session.id}", anyio.Lock()):
            if not session.owned:
                return
            for position, message_id, text, files in await self.leases.waiting(session.id, session.inbox_after):
                session.enqueue(message_id, text, files)
                session.inbox_after = position

    async def sync(self, session: AgentSession) -> None:
        """The events other instances wrote since this one last looked."""
        assert self.leases is not None
        async with self._syncing.setdefault(session.id, anyio.Lock()):
            if not session.owned:
                session.relay.sync(await self.leases.events_after(session.id, session.relay.last_seq))

    async def fence(self) -> None:
        """Let a session go when its lease may lapse: this instance could not renew it in time, and another may
        take it over then. Two claudes must not act on one workspace and one transcript, so this instance stops
        its own without waiting to hear from the database, which may be what is gone (the keeper may be waiting
        on it). The lease's expiry is counted in the database from a moment after the one counted here."""
        every = max(0.05, self.settings.lease_ttl / 3)  # (a claim made meanwhile lapses a lease_ttl later)
        while True:
            now = anyio.current_time()
            for session_id, until in list(self._lease_until.items()):
                session = self.live.get(session_id)
                if session is None or not session.owned:
                    del self._lease_until[session_id]  # (let go here: given up, handed over, or lost)
                elif until <= now:
                    self.lapsed(session)
            due = min(self._lease_until.values(), default=math.inf)
            with anyio.move_on_after(max(0.0, min(due - now, every))):
                await self._deadline_added.wait()
            self._deadline_added = anyio.Event()

    async def keep_leases(self) -> None:
        """Renew this instance's leases; one it lost is let go at once. Its own loop, which waits on nothing else:
        the fence lets a session go when its renewal is late."""
        every = max(0.2, self.settings.lease_ttl / 3)
        while True:
            try:
                with anyio.move_on_after(2 * self.settings.lease_ttl) as late:  # (a connection stuck: try another)
                    await self._renew()
                if late.cancelled_caught:
                    log.warning("the agent's leases not renewed: the database did not answer in time")
            except DatabaseError as e:
                log.warning("the agent's leases not renewed: %s", e)
            with anyio.move_on_after(every):
                await self._renew_now.wait()
            self._renew_now = anyio.Event()  # (an anyio Event is set once: the next round waits on a new one)

    async def _renew(self) -> None:
        assert self.leases is not None and self._tg is not None
        asked = anyio.current_time()
        mine = {s.id: s.relay.token for s in self.live.values() if s.owned}
        held = await self.leases.renew(self._wanted())
        self._renewed_at = asked
        until, renewed = asked + self.settings.lease_ttl, set(held.values())
        still = self._wanted()
        for session_id, renewed_token in held.items():
            if renewed_token not in still:  # let go while the renewal was under way (the fence): not kept
                self._tg.start_soon(partial(self._give_up_lease, session_id, renewed_token, pause=False))
        for session_id, kept in mine.items():
            if held.get(session_id) == kept and session_id in self._lease_until:
                self._lease_until[session_id] = until
        for taken in renewed & self._taking.keys():
            self._taking[taken] = until
        for session in list(self.live.values()):
            token = session.relay.token
            if (
                session.owned
                and held.get(session.id) != token
                and await self.leases.holder(session.id) != token
                and session.relay.token == token
            ):
                self.lost(session)  # (asked again: a lease taken just after the renewal is not lost)

    def _wanted(self) -> set[int]:
        """The leases this instance keeps: the sessions it runs, its claims under way, its hand-overs closing."""
        running = {s.relay.token for s in self.live.values() if s.owned}
        return {t for t in running if t is not None} | self._taking.keys() | self._handing

    async def look_around(self) -> None:
        """Catch up what a missed notification would have said of the sessions followed here, and take up the
        sessions whose instance is gone."""
        assert self.leases is not None and self._tg is not None
        every = max(0.2, self.settings.lease_ttl / 3)
        while True:
            try:
                for session in list(self.live.values()):
                    if not session.owned and not session.relay.closed:
                        await self.sync(session)
                for session_id in await self.leases.unclaimed():
                    self._tg.start_soon(self.claim, session_id)
            except DatabaseError as e:
                log.warning("the sessions of other instances not looked at: %s", e)
            with anyio.move_on_after(every):
                await self._claims.wait()
            self._claims = anyio.Event()
