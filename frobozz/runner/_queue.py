"""Runs as jobs: `play --queue` puts them in Postgres, `frobozz worker` on any machine with the same
database takes them and plays them.

The queue is pgqueuer's (asyncpg, the driver Frobozz already uses; procrastinate would bring psycopg as a
second one): it hands each job to one worker at a time, wakes workers by LISTEN/NOTIFY, and gives a job
whose worker stopped beating its heart (kill -9, a machine gone) to another. A run is a job with its id
as payload, on the entrypoint of its story file (`play:<md5>`), so a worker takes only games it has.
Over that, a session-level advisory lock per run makes "never played twice at once" hold even when a
heartbeat is late: the lock goes with its holder's connection, so the next holder waits for it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import cast

import anyio
import asyncpg
from opentelemetry import trace
from pgqueuer import Job, Queries, QueueManager, RetryRequested
from pgqueuer.adapters.tracing.opentelemetry import OpenTelemetryTracing
from pgqueuer.ports.tracing import TRACER, set_tracing_class

from frobozz import _spans
from frobozz._tasks import first_leaf, until_stopped
from frobozz.games import GameError, GameLibrary, read_story
from frobozz.memory import DATABASE_ERRORS

from ._context import DATABASE_GONE, NOT_RECORDED, TurnNotRecordedError
from ._ledger import RunLedger, worker_name
from ._opening import mark_queued
from ._players import PlayerError
from ._run import RunConfig, RunResult, check_prompt_file, new_info, play
from ._store import RunBusyError, RunInfo, RunNotFoundError, RunStore
from .settings import RunnerSettings

log = logging.getLogger("frobozz.worker")
_INSTALL_LOCK = 0x70677175  # "pgqu": one install of the queue's tables at a time
ATTEMPTS = 3  # a run that stops on an error this many times (claude's process did not start, a bug) is failed


def entrypoint(story_md5: str) -> str:
    return f"play:{story_md5}"


async def install_queue(ledger: RunLedger) -> Queries:
    """The queue's tables (pgqueuer's own schema), installed by whoever comes first. A job carries its trace
    context in its headers (pgqueuer's OpenTelemetry tracing: a no-op with no SDK configured), so a run
    queued here and played by one worker, then another, is one trace: `send`, then each `process`."""
    if TRACER.tracer is None:
        set_tracing_class(OpenTelemetryTracing())
    async with ledger.pool.acquire() as connection, connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _INSTALL_LOCK)
        queries = Queries.from_asyncpg_connection(cast("asyncpg.Connection", connection))  # a pooled one, as good
        if not await queries.schema_is_installed():
            await queries.install()
    return Queries.from_asyncpg_pool(ledger.pool)


async def enqueue(ledger: RunLedger, config: RunConfig, settings: RunnerSettings, runs: int) -> list[str]:
    """`runs` new runs of `config`, queued; their ids, in order. PlayerError, and nothing queued, when its prompt
    file cannot be read (a worker would fail each)."""
    if config.prompt_file is not None:
        check_prompt_file(config.prompt_file)
    queries = await install_queue(ledger)
    infos = [new_info(config, settings) for _ in range(runs)]
    for info in infos:
        await ledger.add(info)
    jobs = await queries.enqueue(
        [entrypoint(i.story_md5) for i in infos],
        [i.run_id.encode() for i in infos],
        [0] * runs,
        dedupe_key=[i.run_id for i in infos],
    )
    await ledger.pool.executemany(
        "UPDATE runs SET job_id = $2 WHERE run_id = $1", [(i.run_id, job) for i, job in zip(infos, jobs, strict=True)]
    )
    return [i.run_id for i in infos]


@dataclasses.dataclass
class _Slots(QueueManager):
    """pgqueuer's manager, holding at most `slots` runs of this worker at a time: its own per-worker budget
    (enforced in the dequeue query) given directly, as `run` asks for twice the batch size, and a run is
    a batch of one."""

    slots: int = 1

    def fetch_jobs(
        self, batch_size: int, global_concurrency_limit: int | None, heartbeat_timeout: timedelta
    ) -> AsyncGenerator[Job, None]:
        return super().fetch_jobs(batch_size, self.slots, heartbeat_timeout)


class Worker:
    """Takes queued runs of the games it has and plays them, `concurrency` at a time, until stopped."""

    def __init__(
        self,
        ledger: RunLedger,
        settings: RunnerSettings,
        *,
        concurrency: int = 1,
        games: list[str] | None = None,
        cli_path: str | None = None,
        on_finished: Callable[[RunResult], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.on_finished = on_finished
        self.settings = settings
        self.concurrency = concurrency
        self.cli_path = cli_path
        self.stories = self._stories(games)  # md5 -> path
        self.stopping = anyio.Event()
        self.played: list[str] = []  # the runs this worker finished, in order

    def _stories(self, games: list[str] | None) -> dict[str, str]:
        library = GameLibrary(self.settings)
        found = [library.find(g, allow_path=True) for g in games] if games else library.stories()
        if not found:
            raise GameError(
                "this worker has no games to play: install one (frobozz games install zork1) "
                "or name story files with --games"
            )
        return {story.md5: str(story.path) for story in found}

    async def run(self) -> None:
        """Play runs until `stop()`; then the runs in hand stop at their next turn boundary and go back
        to the queue (their turns committed), and this returns. A database that goes away stops the runs in
        hand where it last had them (the queue gives them out again once it is back) and is waited for."""
        await until_stopped(self._serve, self.stopping, DATABASE_ERRORS, log, "the queue's database")

    async def _serve(self) -> None:
        queries = await install_queue(self.ledger)
        manager = _Slots(queries, slots=self.concurrency)
        for md5 in self.stories:
            manager.entrypoint(entrypoint(md5))(self._take)
        heartbeat = timedelta(seconds=self.settings.worker_heartbeat)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._shutdown_when_stopping, manager)
            await manager.run(batch_size=1, heartbeat_timeout=heartbeat, dequeue_timeout=heartbeat)
            tg.cancel_scope.cancel()

    def stop(self) -> None:
        self.stopping.set()

    async def _shutdown_when_stopping(self, manager: QueueManager) -> None:
        await self.stopping.wait()
        manager.shutdown.set()

    async def _take(self, job: Job) -> None:
        run_id = (job.payload or b"").decode()
        current = trace.get_current_span()  # the job's `process` span: the run's session span links to it
        if current.is_recording():
            current.set_attributes({_spans.RUN_ID: run_id, _spans.WORKER: worker_name()})
        async with self._held(run_id):
            try:
                row = await self.ledger.get(run_id)
            except RunNotFoundError:
                log.warning("job %s names run %s, which is not in the database: dropped", job.id, run_id)
                return
            if row["status"] not in ("queued", "running"):
                return  # played to its end by the worker that held it before
            if self.stopping.is_set():
                raise RetryRequested(reason="the worker is stopping")
            try:
                await self._play(run_id, first=row["started_at"] is None)
            except RetryRequested:
                raise
            except Exception as e:  # noqa: BLE001 - pgqueuer deletes the job of a handler that raised: its run
                await self._after_error(run_id, e)  # would be left running, and never played again

    async def _play(self, run_id: str, *, first: bool) -> None:
        async with self._checked_out(run_id) as store:
            info = store.info
            extra: dict[str, object] = {"worker": worker_name(), "run_dir": str(store.dir), "ended_at": None}
            if first:
                extra["started_at"] = datetime.now(UTC)
            try:
                info.story = self._story(info.story, info.story_md5)
            except GameError as e:
                info.status, info.reason = "failed", f"this worker cannot find the game: {e}"[:300]
            store.save_info()
            await self.ledger.save(info, **extra)
        if info.status == "failed":
            return
        result = await play(
            RunConfig(resume=run_id),
            self.settings,
            ledger=self.ledger,
            queued=True,
            stop=self.stopping,
            cli_path=self.cli_path,
        )
        if (result.reason or "").startswith(DATABASE_GONE):
            await self._requeue_when_back(run_id)
            raise RetryRequested(reason="the database went away: the run goes on from its last committed turn")
        if (result.reason or "").startswith(NOT_RECORDED):  # this machine's disk: tried again, here or elsewhere
            raise TurnNotRecordedError(result.reason)
        if result.reason == "interrupted" and self.stopping.is_set():
            await self._requeue(await self.ledger.info(run_id))
            raise RetryRequested(reason="the worker stopped: the run goes on elsewhere from its last turn")
        self.played.append(run_id)
        if self.on_finished is not None:
            self.on_finished(result)

    async def _after_error(self, run_id: str, error: Exception) -> None:
        """The run stopped on an error. A player's or game's (claude not logged in, a story file it cannot read):
        failed, as no try would do better. Another, of this worker's (claude's process did not start, a bug):
        back to the queue, to go on from its last committed turn here or on another worker a few seconds later,
        unless it is the run's ATTEMPTS-th error: then failed, with the error as its reason. With its database
        away, the run goes back once it is back, as the database last had it."""
        leaf = first_leaf(error)
        what = f"{type(leaf).__name__}: {leaf}"
        if isinstance(leaf, RunBusyError):  # not the run's error: it goes on once that process lets it go
            raise RetryRequested(delay=timedelta(seconds=self.settings.worker_retry), reason=what) from error
        try:
            info = await self.ledger.info(run_id)
            if isinstance(leaf, PlayerError | GameError):
                await self._fail(info, str(leaf))
                return
            info.errors += 1
            if info.errors >= ATTEMPTS:
                log.error("run %s failed: it stopped on an error %d times", run_id, ATTEMPTS, exc_info=error)
                await self._fail(info, f"stopped on an error {ATTEMPTS} times; the last: {what}")
                return
            log.warning("run %s stopped on an error (%d of %d), queued again: %s", run_id, info.errors, ATTEMPTS, what)
            log.debug("where the run stopped", exc_info=error)
            await self._requeue(info)
        except DATABASE_ERRORS as e:  # (perhaps what stopped the run)
            log.warning("run %s stopped on an error, and its database is away: %s (%s)", run_id, what, e)
            await self._requeue_when_back(run_id)
            raise RetryRequested(delay=timedelta(seconds=2), reason=f"the database failed: {e}") from error
        raise RetryRequested(delay=timedelta(seconds=self.settings.worker_retry * info.errors), reason=what) from error

    async def _requeue(self, info: RunInfo) -> None:
        """The run back in the queue, not ended (its end, written as it stopped, undone): queued in the
        database, with no end time, and in its directory here if it has one."""
        info.status, info.reason = "queued", None
        await self.ledger.save(info, ended_at=None)
        if (here := self.settings.runs_dir / info.run_id).is_dir():
            try:  # (a database error would leave the run as the database last had it: _requeue_when_back)
                RunStore(here, info).save_info()
            except OSError as e:
                log.warning("run %s is queued again; its directory here could not say so: %s", info.run_id, e)

    async def _fail(self, info: RunInfo, reason: str) -> None:
        """The run ended as failed: in the database, and in its directory on this machine if it has one."""
        info.status, info.reason = "failed", reason[:300]
        await self.ledger.save(info, ended_at=datetime.now(UTC))
        if (here := self.settings.runs_dir / info.run_id).is_dir():
            try:  # (not a database error: one would put the run back in the queue, to be failed again)
                RunStore(here, info).save_info()
            except OSError as e:
                log.warning("run %s failed; its directory here could not say so: %s", info.run_id, e)

    async def _requeue_when_back(self, run_id: str) -> None:
        """The run stopped because its database went away: once it is back, the run goes back to the queue
        as the database last had it (its turns there; what this machine played beyond them is played again).
        A worker told to stop meanwhile stops waiting: the run stays as the database has it, and its job,
        whose heartbeat ends with this worker, goes to another."""
        delay = 0.5
        while not self.stopping.is_set():
            try:
                await self._requeue(await self.ledger.info(run_id))
                return
            except DATABASE_ERRORS as e:
                log.warning("run %s waits for its database: %s", run_id, e)
                with anyio.move_on_after(delay):
                    await self.stopping.wait()
                delay = min(delay * 2, 30)

    def _story(self, path: str, md5: str) -> str:
        """The run's story file on this machine: where the run was queued if it is the same file here,
        else the one with the same checksum in this worker's games."""
        try:
            if read_story(path).md5 == md5:
                return path
        except GameError:
            pass
        if md5 in self.stories:
            return self.stories[md5]
        raise GameError(f"no story file with checksum {md5} here")

    @asynccontextmanager
    async def _checked_out(self, run_id: str) -> AsyncIterator[RunStore]:
        """The run's directory here, made to agree with the database, held by this process (RunStore.hold)
        while it is written, and marked the queue's before anything else is written in it: a `play --resume`
        here finds it marked whenever it finds it at all, and decides so under the same lock (before, one
        that came between the checkout and the mark played the run by hand while this worker played it on
        from the database's record). RunBusyError when a process here plays the run now: its files are
        left as they are."""
        directory = self.settings.runs_dir / run_id
        directory.mkdir(parents=True, exist_ok=True)
        with RunStore(directory, await self.ledger.info(run_id)) as held:
            held.hold()
            mark_queued(held)  # a `play --resume` of it here is refused: the queue's runs are the workers'
            yield await self.ledger.checkout(run_id, self.settings.runs_dir)

    @asynccontextmanager
    async def _held(self, run_id: str) -> AsyncIterator[None]:
        """The run's lock, on a connection of its own (a lock dies with its connection, and so with its
        worker): waited for while another worker still plays the run."""
        async with self.ledger.pool.acquire() as connection:
            # Postgres says nothing when a lock frees, and a blocking pg_advisory_lock would hold the
            # connection in a query that only a cancel request could end: tried again every 0.5 s
            while not await connection.fetchval(  # noqa: ASYNC110 - see the comment above
                "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", f"frobozz-run:{run_id}"
            ):
                await anyio.sleep(0.5)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        await connection.execute(
                            "SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"frobozz-run:{run_id}"
                        )
                    except DATABASE_ERRORS:
                        pass  # the connection is gone, and its lock with it
