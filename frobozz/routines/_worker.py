"""Routines fired by `frobozz worker`, on one machine or many sharing the database.

Every worker looks at the routines (each tick, and each mailbox or feed every --poll, or at once when
an inbox's IDLE says mail came) and puts what is due on pgqueuer's queue: a schedule's next due time a
little ahead, with the queue's own deferral (`execute_after`), so the queue starts it on time; a mail
or entry at once, one at a time per routine, oldest first. The queue's dedupe key (while a job waits)
and the firings' unique key (after) make each due time and each item fire once however many workers
look; the queue gives a job whose worker died (kill -9) to another, which fires it again unless its
firing ended. A firing of a routine whose previous firing still runs is skipped, with the reason kept.
The queue's per-entrypoint limit is the global concurrency limit."""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import anyio
import asyncpg
from pgqueuer import Job, QueueManager, RetryRequested

from frobozz import _spans
from frobozz._tasks import until_stopped, while_following
from frobozz.engine.producers import Inbox, Item, Schedule
from frobozz.memory import DATABASE_ERRORS, DatabaseError, MemoryService, MemorySettings
from frobozz.runner import RunLedger, RunNotFoundError, install_queue

from ._fire import fire, item_json
from ._spec import Routine, producer
from ._store import DIED_BY_HAND, ENDED, RoutineStore
from ._warm import Warm
from .exceptions import RoutineError
from .settings import RoutineSettings

log = logging.getLogger("frobozz.routines")
ENTRYPOINT = "routine"
WARM_LEAD = 60.0  # seconds before a schedule's due time that its claude is started, to wait warm
ARCHIVE = "in the feed, undated, when the routine first read it: taken for its archive from before the routine"
MISSED = "missed: no worker was looking when it was due"
MISSED_KEPT = 100  # missed due times recorded one by one (a machine off for a month is not 40,000 rows)
READS_AT_ONCE = 8  # mailboxes and feeds one worker reads at once (a thousand feeds: not a thousand fetches)
# the database's going away, as a firing meets it (a memory service that saw it go says so for a while after)
GONE = (
    OSError,
    DatabaseError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
)
AGAIN = 3  # times a firing is fired again at once after such an error from a database that answers: then it is raised
ASK_WITHIN = 5.0  # seconds the database has to answer `SELECT 1` (one that hangs is "gone" too)
ALIVE_EVERY = 5.0  # seconds between the marks that a firing's worker is alive (a due time that came while it ran:
# an overlap; after its worker died, before its firing was taken up again: missed)


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


async def enqueue(
    store: RoutineStore,
    ledger: RunLedger,
    name: str,
    key: str,
    title: str,
    *,
    due: datetime | None = None,
    item: dict[str, Any] | None = None,
    manual: bool = False,
) -> bool:
    """A firing on the queue (at `due`, or now) and in the firings table; False if it was there already."""
    queries = await install_queue(ledger)
    delay = max((due - datetime.now(UTC)).total_seconds(), 0.0) if due else 0.0
    payload = json.dumps(
        {
            "routine": name,
            "key": key,
            "title": title,
            "manual": manual,
            "due": due.isoformat() if due else None,
            "item": item,
        }
    ).encode()
    (job,) = await queries.enqueue(
        ENTRYPOINT, payload, 0, timedelta(seconds=delay), f"routine:{name}:{key}", on_conflict="skip"
    )
    claimed = await store.claim(name, key, title, due=due, item=item)
    return job is not None and claimed


async def _next(store: RoutineStore, row: dict[str, Any]) -> tuple[Schedule, datetime, datetime, list[datetime]]:
    """The schedule, the moment it counts from, its next due time after that, and the due times before the
    pauses since its last due time, which no worker fired nor recorded: missed (the pauses' own are neither)."""
    spec: Routine = row["spec"]
    schedule = producer(spec, store, created=row["created"])
    assert isinstance(schedule, Schedule)
    last = max(filter(None, [await store.last_due(spec.name), row["created"]]))
    missed: list[datetime] = []
    if row["updated"] > last:  # paused or resumed since (`updated`: when it was last resumed, or paused)
        for paused, resumed in await store.pauses(spec.name, last):
            missed += _due_before(schedule, last, paused)
            last = max(last, resumed)
    last = max(last, row["updated"])
    return schedule, last, schedule.next_after(last), missed


def _due_before(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    """The due times in (after, until): the first MISSED_KEPT - 1 of them and the last (a machine off for a
    month before its routine was paused is not 40,000 rows either)."""
    found: list[datetime] = []
    due = schedule.next_after(after)
    while due < until and len(found) < MISSED_KEPT - 1:
        found.append(due)
        due = schedule.next_after(due)
    if due < until:
        found.append(schedule.latest_due(due, until - timedelta(microseconds=1)) or due)
    return found


async def next_due(store: RoutineStore, row: dict[str, Any]) -> datetime | None:
    """A schedule's next due time as the workers see it (one already past: it fires at the next look), for a
    routine as `RoutineStore.routines` gives it; None for an inbox or a feed, which fire on what comes."""
    if row["spec"].kind not in ("cron", "every"):
        return None
    return (await _next(store, row))[2]


async def _run_failed(ledger: RunLedger, run_id: str, reason: str, ended: datetime) -> None:
    with contextlib.suppress(RunNotFoundError):  # (none when the firing ended before its run was made)
        info = await ledger.info(run_id)
        if info.status in ("queued", "running"):
            info.status, info.reason = "failed", reason
            await ledger.save(info, ended_at=ended)


async def end_dead_by_hand(store: RoutineStore, ledger: RunLedger, settings: RoutineSettings) -> int:
    """End the firings by hand (`routine run`) whose process died mid-firing, and their runs, by the rule the
    queue has for a worker's: not seen alive (marked every ALIVE_EVERY seconds) for the worker heartbeat (at
    least three marks). How many were ended. Each worker's look does it, and `routine list`/`show`."""
    ended = await store.end_dead_by_hand(max(settings.worker_heartbeat, 3 * ALIVE_EVERY))
    for firing in ended:
        log.warning("routine %s: firing %s by hand %s", firing["routine"], firing["key"], DIED_BY_HAND)
        if firing["run_id"]:
            await _run_failed(ledger, firing["run_id"], DIED_BY_HAND, firing["ended"])
    return len(ended)


class Firer:
    """Fires one firing to its end: the part a worker's job and `routine run` share."""

    def __init__(
        self,
        store: RoutineStore,
        ledger: RunLedger,
        memory: MemoryService,
        settings: RoutineSettings,
        *,
        cli_path: str | None = None,
    ) -> None:
        self.store, self.ledger, self.memory, self.settings, self.cli_path = store, ledger, memory, settings, cli_path
        self.warm: Warm | None = None  # a worker's claudes kept started between firings

    async def __call__(self, data: dict[str, Any]) -> str | None:
        """The firing's end state (None: nothing to do: ended before, or its routine is gone). Traced: a span
        from the job taken to its end (in the trace of the queue's job), the firing's claude session linked."""
        name = str(data["routine"])
        with _spans.span(
            _spans.ROUTINE_FIRE, attributes={_spans.ROUTINE: name, _spans.ROUTINE_MANUAL: bool(data.get("manual"))}
        ) as span:
            state = await self._fire(data, span)
            span.set_attribute(_spans.ROUTINE_STATE, state or "nothing to do")
            if state == "failed":
                _spans.record_error(span, "the firing failed")
            return state

    async def _fire(self, data: dict[str, Any], span: _spans.Span) -> str | None:
        name, key = str(data["routine"]), str(data["key"])
        async with self._lock(f"frobozz-firing:{name}:{key}", wait=True) as connection:
            try:
                row = await self.store.get(name)
            except RoutineError:
                return None
            spec: Routine = row["spec"]
            span.set_attribute(_spans.ROUTINE_KIND, spec.kind)
            firing = await self.store.firing(name, key)
            if firing is None:  # the worker that queued it died before recording it
                due = datetime.fromisoformat(data["due"]) if data.get("due") else None
                await self.store.claim(name, key, data.get("title") or key, due=due, item=data.get("item"))
                firing = await self.store.firing(name, key)
            assert firing is not None
            if firing["state"] in ENDED:
                return None
            taken_up = firing["state"] == "running"  # again: its worker died mid-firing
            if row["paused"] and not data.get("manual"):
                if taken_up:
                    await self._abandoned(firing, "the routine was paused before it was taken up again")
                    return "failed"
                await self.store.finish(name, key, "skipped", "the routine was paused before it fired")
                return "skipped"
            if not await connection.fetchval(
                "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", f"frobozz-routine:{name}"
            ):
                if taken_up:
                    await self._abandoned(firing, "a later firing took the routine before it was taken up again")
                    return "failed"
                await self.store.finish(name, key, "skipped", await self._busy(spec, firing, data))
                return "skipped"
            try:
                run_id = firing["run_id"] or new_run_id()
                span.set_attribute(_spans.RUN_ID, run_id)
                await self.store.start(name, key, run_id)
                try:
                    warm = self.warm
                    async with warm.lease(name) if warm else nullcontext() as spare:
                        fired = await while_following(
                            lambda: fire(
                                spec,
                                key,
                                firing["title"],
                                firing["item"],
                                run_id,
                                ledger=self.ledger,
                                memory=self.memory,
                                settings=self.settings,
                                cli_path=self.cli_path,
                                spare=spare,
                                sidecar=warm.sidecar(spec) if warm else None,
                            ),
                            partial(self._alive, name, key),
                        )
                except Exception as e:  # a firing that cannot run is recorded, the worker goes on
                    if isinstance(e, DATABASE_ERRORS) and not isinstance(e, OSError):
                        raise  # the database's own: taken up again once it is back, from what was recorded
                    await self._failed(name, key, run_id, e)  # (an OSError may be the firing's own: see there)
                    return "failed"
                await self.store.finish(
                    name, key, fired.state, fired.reason, cost_usd=fired.cost_usd, run_id=fired.run_id or None
                )
                span.set_attributes({_spans.ROUTINE_REASON: fired.reason, _spans.COST_USD: fired.cost_usd})
                return fired.state
            finally:  # (a connection the database dropped is gone, and the lock with its session)
                with anyio.CancelScope(shield=True), contextlib.suppress(*DATABASE_ERRORS):
                    await connection.execute(
                        "SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"frobozz-routine:{name}"
                    )

    async def _alive(self, name: str, key: str) -> None:
        """Mark the firing's worker alive every ALIVE_EVERY seconds while it runs (a mark the database did not
        take is left to the next one)."""
        while True:
            await anyio.sleep(ALIVE_EVERY)
            with contextlib.suppress(*DATABASE_ERRORS):
                await self.store.alive(name, key)

    async def _busy(self, spec: Routine, firing: dict[str, Any], data: dict[str, Any]) -> str:
        """Why a firing (a queued one) whose routine's lock is held is skipped. A due time when no firing of its
        routine ran was missed, not an overlap: one that came after the worker of the firing holding it now died,
        before that firing was taken up again. One that came while that firing's first worker still ran it was an
        overlap (its start was not the re-take's: `RoutineStore.running_at` keeps each attempt's time)."""
        due = firing["due"]
        if (
            spec.kind in ("cron", "every")
            and not data.get("manual")
            and not await self.store.running_at(spec.name, firing["key"], due)
        ):
            return MISSED
        return "overlap: the routine's previous firing was still running"

    async def _abandoned(self, firing: dict[str, Any], why: str) -> None:
        """A firing whose worker died mid-firing, taken up again when it can no longer be fired: it and its run
        end failed, saying why (it was skipped as an overlap, and its run left running for ever)."""
        reason = f"abandoned: its worker died mid-firing, and {why}"
        log.warning("routine %s: firing %s %s", firing["routine"], firing["key"], reason)
        await self.store.finish(firing["routine"], firing["key"], "failed", reason)
        if firing["run_id"]:
            await self._run_failed(firing["run_id"], reason)

    async def _failed(self, name: str, key: str, run_id: str, error: Exception) -> None:
        """The firing stopped on an error: it and its run are failed, saying so. When that cannot be written, the
        database is away: its error goes up, and the firing is taken up again once it is back. (An OSError, a
        workspace that could not be made, was taken for the database's before: the firing and its run were
        left running for ever.)"""
        reason = f"{type(error).__name__}: {error}"[:300]
        log.warning("routine %s: firing %s failed: %s", name, key, reason)
        await self.store.finish(name, key, "failed", reason)
        await self._run_failed(run_id, reason)

    async def _run_failed(self, run_id: str, reason: str) -> None:
        """A firing's run ended failed with it, unless it ended otherwise already (then it says so)."""
        await _run_failed(self.ledger, run_id, reason, datetime.now(UTC))

    @asynccontextmanager
    async def _lock(self, name: str, *, wait: bool) -> AsyncIterator[Any]:
        """A lock on a connection of its own (it dies with the connection, and so with its worker)."""
        async with self.ledger.pool.acquire() as connection:
            # Postgres says nothing when a lock frees, and a blocking pg_advisory_lock would hold the
            # connection in a query that only a cancel request could end: tried again every 0.25 s
            while not await connection.fetchval(  # noqa: ASYNC110 - see the comment above
                "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", name
            ):
                await anyio.sleep(0.25)
            try:
                yield connection
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await connection.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", name)
                    except DATABASE_ERRORS:
                        pass


class RoutineWorker:
    """Looks at the routines and fires what is due, until stopped."""

    def __init__(
        self,
        store: RoutineStore,
        ledger: RunLedger,
        settings: RoutineSettings,
        *,
        memory: MemoryService | None = None,
        cli_path: str | None = None,
    ) -> None:
        self.store, self.ledger, self.settings = store, ledger, settings
        self.memory = memory or MemoryService(MemorySettings())
        self.firer = Firer(store, ledger, self.memory, settings, cli_path=cli_path)
        self.cli_path = cli_path
        self.stopping = anyio.Event()
        self.fired: list[tuple[str, str, str | None]] = []  # (routine, key, end state) this worker fired
        self._next_look: dict[str, float] = {}
        self._watching: dict[str, anyio.CancelScope] = {}
        self._inboxes: dict[str, tuple[Routine, Inbox]] = {}  # kept between looks, with their IMAP connections
        self._reading: set[str] = set()  # the routines whose mailbox or feed a look of this worker is reading
        self._reads = anyio.CapacityLimiter(READS_AT_ONCE)  # (they share the store's few connections too)
        self._read_once: set[tuple[str, datetime]] = set()  # feeds (name, created) whose first read is recorded
        self._wake = anyio.Event()

    def stop(self) -> None:
        self.stopping.set()

    async def run(self) -> None:
        async with Warm(self.settings, self.memory, cli_path=self.cli_path) as warm:
            self.firer.warm = warm
            try:
                await until_stopped(self._serve, self.stopping, DATABASE_ERRORS, log, "the routines' database")
            finally:
                self.firer.warm = None

    async def _serve(self) -> None:
        queries = await install_queue(self.ledger)
        manager = QueueManager(queries)
        manager.entrypoint(ENTRYPOINT, concurrency_limit=self.settings.routine_concurrency)(self._take)
        heartbeat = timedelta(seconds=self.settings.worker_heartbeat)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._look_loop)
            tg.start_soon(self._shutdown_when_stopping, manager)
            await manager.run(batch_size=1, heartbeat_timeout=heartbeat, dequeue_timeout=heartbeat)
            tg.cancel_scope.cancel()

    async def _shutdown_when_stopping(self, manager: QueueManager) -> None:
        await self.stopping.wait()
        manager.shutdown.set()

    async def _take(self, job: Job) -> None:
        data = json.loads((job.payload or b"{}").decode())
        again = 0
        while True:
            if self.stopping.is_set():
                raise RetryRequested(reason="the worker is stopping")
            try:
                state = await self.firer(data)
                break
            except DATABASE_ERRORS as e:
                if not await self._wait_for_database(data, e):
                    again += 1
                    if again > AGAIN:  # (an OSError of its own, say, the database answering all along)
                        raise
        self.fired.append((data["routine"], data["key"], state))
        self._next_look.pop(data["routine"], None)  # an inbox or feed: its next item at once
        self._wake.set()

    async def _wait_for_database(self, data: dict[str, Any], error: Exception) -> bool:
        """A firing stopped by its database going away is said in lines and fired again once it answers, and
        memory with it (raised through the queue, it was a traceback of ninety lines). Another error from a
        database that answers is not that: it goes up whole. Whether the database was found away."""
        said = f"routine {data['routine']}: firing {data['key']} stopped, its database gone ({error})"
        delay = 0.5
        while (gone := await self._database_gone()) is not None:
            log.warning("%s: trying again in %.1f s", said, delay)
            said = f"routine {data['routine']}: firing {data['key']}: the database does not answer ({gone})"
            with anyio.move_on_after(delay):
                await self.stopping.wait()
            if self.stopping.is_set():
                return True
            delay = min(delay * 2, 30)
        if delay == 0.5:
            if not isinstance(error, GONE):
                raise error
            log.warning("%s: firing it again", said)
        with anyio.move_on_after(60):  # (memory comes back on at its own probe)
            await self.memory.until_answering()
        return delay > 0.5

    async def _database_gone(self) -> str | None:
        """None when the firings' database answers, else why not."""
        try:
            await self.ledger.pool.fetchval("SELECT 1", timeout=ASK_WITHIN)
        except DATABASE_ERRORS as e:
            return str(e) or type(e).__name__
        return None

    async def _look_loop(self) -> None:
        try:
            await self._looking()
        finally:
            for name in list(self._inboxes):
                await self._forget(name)

    async def _forget(self, name: str) -> None:
        """Stop watching a routine's mailbox and log its kept connections out."""
        scope = self._watching.pop(name, None)
        if scope is not None:
            scope.cancel()
        kept = self._inboxes.pop(name, None)
        if kept is not None:
            await kept[1].aclose()

    async def _looking(self) -> None:
        async with anyio.create_task_group() as tg:
            while not self.stopping.is_set():
                try:
                    routines = await self.store.routines(active=True)
                    await end_dead_by_hand(self.store, self.ledger, self.settings)
                    read = True
                except DATABASE_ERRORS as e:
                    log.warning("routines cannot be read: %s", e)
                    routines, read = [], False
                for row in routines:
                    if row["spec"].kind not in ("inbox", "feed"):
                        await self._look(row, tg)
                    elif row["name"] not in self._reading:  # read beside the others: a slow one holds up none
                        self._reading.add(row["name"])
                        tg.start_soon(self._look_apart, row, tg)
                if read:
                    for name in (set(self._watching) | set(self._inboxes)) - {r["name"] for r in routines}:
                        await self._forget(name)
                if self.firer.warm is not None and read:
                    self.firer.warm.keep_only({r["name"] for r in routines})
                self._wake = anyio.Event()
                with anyio.move_on_after(self.settings.routine_tick):
                    await self._wake.wait()
            tg.cancel_scope.cancel()

    async def _look(self, row: dict[str, Any], tg: Any) -> None:
        try:
            await self.look(row, tg)
        except asyncpg.ForeignKeyViolationError:  # what it found was recorded after the routine was removed
            log.info("routine %s was removed while its source was read", row["name"])
        except DATABASE_ERRORS:
            raise
        except Exception as e:  # noqa: BLE001 - one routine's trouble never stops the others
            log.warning("routine %s: %s", row["name"], e)
            await self.store.set_problem(row["name"], f"{type(e).__name__}: {e}")

    async def _look_apart(self, row: dict[str, Any], tg: Any) -> None:
        try:
            async with self._reads:
                await self._look(row, tg)
        finally:
            self._reading.discard(row["name"])

    async def look(self, row: dict[str, Any], tg: Any = None) -> None:
        """Put what is due of one routine on the queue."""
        spec: Routine = row["spec"]
        now = datetime.now(UTC)
        if spec.kind in ("cron", "every"):
            schedule, last, due, before_pauses = await _next(self.store, row)
            for missed in before_pauses:  # (first: once a later due time is recorded, they are not looked for)
                await self._missed(spec.name, missed)
            if due <= now:  # late (no worker was looking): the latest due time fires, the missed ones are recorded
                latest = schedule.latest_due(last, now) or due
                for _ in range(MISSED_KEPT):
                    if due >= latest:
                        break
                    await self._missed(spec.name, due)
                    due = schedule.next_after(due)
                due = latest
            if self.firer.warm is not None and due - now <= timedelta(seconds=WARM_LEAD):
                await self.firer.warm.prime(spec)
            if due - now <= timedelta(seconds=self.settings.routine_tick * 2 + 1):
                await enqueue(
                    self.store, self.ledger, spec.name, Schedule.key(due), f"due {Schedule.key(due)}", due=due
                )
            return
        clock = anyio.current_time()
        if clock < self._next_look.get(spec.name, 0.0):
            return
        self._next_look[spec.name] = clock + spec.poll
        if await self.store.open_firings(spec.name):
            return  # one at a time, oldest first
        kept = self._inboxes.get(spec.name)
        if kept is not None and kept[0] != spec:  # removed and added again with other settings
            await self._forget(spec.name)
            kept = None
        source = (
            kept[1]
            if kept
            else producer(
                spec,
                self.store,
                created=row["created"],
                idle=self.settings.routine_idle,
                timeout=self.settings.routine_read_timeout,
            )
        )
        if isinstance(source, Inbox):
            self._inboxes[spec.name] = (spec, source)  # its connections kept: the next look is a round trip
        try:
            items = await source.poll()
        except RoutineError:
            raise
        except Exception as e:
            await self._forget(spec.name)  # made again at the next look (a password changed in its file is read)
            await self.store.set_problem(spec.name, str(e))
            raise
        if row.get("problem"):
            await self.store.set_problem(spec.name, None)
        if self.firer.warm is not None:  # a source that can be read: its next firing's claude waits started
            await self.firer.warm.prime(spec)
        if spec.kind == "feed":
            items = await self._past_archive(spec.name, row["created"], items)
        for item in items:
            if item.skipped:
                await self.store.claim(spec.name, item.key, item.title, state="skipped", reason=item.skipped)
                continue
            await enqueue(self.store, self.ledger, spec.name, item.key, item.title, item=item_json(item))
            break
        if isinstance(source, Inbox) and source.use_idle and tg is not None and spec.name not in self._watching:
            scope = anyio.CancelScope()
            self._watching[spec.name] = scope
            tg.start_soon(self._watch, spec.name, source, scope)

    async def _missed(self, name: str, due: datetime) -> None:
        key = Schedule.key(due)
        await self.store.claim(name, key, f"due {key}", due=due, state="skipped", reason=MISSED)

    async def _past_archive(self, name: str, created: datetime, items: list[Item]) -> list[Item]:
        """A feed's entries less, at its first read by any worker, the undated ones, recorded as seen: a dated
        entry from before the routine was added is left out by its date, an undated one is taken for the
        archive too."""
        if (name, created) in self._read_once:
            return items
        undated = [i for i in items if i.at is None and not i.skipped]
        first = await self.store.first_read(name, [(i.key, i.title) for i in undated], ARCHIVE)
        self._read_once.add((name, created))  # (recorded: by this read or an earlier one, here or elsewhere)
        if not first:
            return items
        archived = {i.key for i in undated}
        return [i for i in items if i.key not in archived]

    async def _watch(self, name: str, inbox: Inbox, scope: anyio.CancelScope) -> None:
        """IDLE on a mailbox: new mail wakes the look at once, instead of at the next poll."""
        with scope:
            while True:
                await inbox.wait()
                self._next_look.pop(name, None)
                self._wake.set()
