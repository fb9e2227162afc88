"""Spans kept locally in Postgres (so a user with no tracing backend still sees where the time went), for
as long as the user sets: a span exporter beside the OTLP one, on the SDK's own thread."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

import asyncpg
import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from .. import _spans as S

log = logging.getLogger("frobozz.tracing")
PRUNE_EVERY = 3600.0  # seconds between two deletions of what is past its time
WRITE_WAIT = 30.0  # seconds a batch's writing may take
FIND_WAIT = 10.0  # seconds a batch waits for the embedded Postgres to start (the first batch only, in practice)
Where = str | Callable[[], Awaitable[str]]  # a URL, or what finds one (starts the embedded Postgres) when first needed
_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "kind",
    "service",
    "started_at",
    "duration_ms",
    "status",
    "session_id",
    "run_id",
    "attributes",
)
_INSERT = (
    f"INSERT INTO trace_spans ({', '.join(_COLUMNS)}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
    "$12) ON CONFLICT DO NOTHING"
)


def schema() -> str:
    return resources.files("frobozz.tracing.migrations").joinpath("001_spans.sql").read_text(encoding="utf-8")


_KINDS = {kind: kind.name.lower() for kind in SpanKind}
_STATUSES = {code: code.name.lower() for code in StatusCode}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _json(attributes: dict[str, Any]) -> str:
    """The attributes as JSON for the jsonb column: orjson (several times faster; tuples as lists, and an
    infinite or NaN float as null, which jsonb takes, not as `Infinity`, which it refuses); json for what
    orjson cannot write (an int past 64 bits)."""
    try:
        return orjson.dumps(attributes, default=str).decode()
    except TypeError:
        return json.dumps(attributes, default=str)


def _row(span: ReadableSpan) -> tuple[Any, ...]:
    attributes = dict(span.attributes or {})
    start, end = span.start_time or 0, span.end_time or span.start_time or 0
    parent = span.parent.span_id if span.parent is not None else None
    service = (span.resource.attributes if span.resource else {}).get("service.name")
    return (
        f"{span.context.trace_id:032x}",
        f"{span.context.span_id:016x}",
        f"{parent:016x}" if parent is not None else None,
        span.name,
        _KINDS[span.kind],
        str(service) if service else None,
        _EPOCH + timedelta(microseconds=start // 1000),
        (end - start) / 1e6,
        _STATUSES[span.status.status_code],
        attributes.get(S.SESSION_ID),
        attributes.get(S.RUN_ID),
        _json(attributes),
    )


class LocalSpans(SpanExporter):
    """Writes each batch to `trace_spans` (made at the first batch) and deletes spans older than `keep_days`
    once an hour. `where` is the database's URL, or an async function that finds it (the embedded Postgres,
    which it may have to start: on a thread of its own from the start, never in the work's way; a batch waits
    for it `find_wait` seconds at most). A database that is away is said once; its spans are dropped, the run
    goes on."""

    def __init__(self, where: Where, keep_days: float, *, find_wait: float = FIND_WAIT) -> None:
        self.keep_days = keep_days
        self.find_wait = find_wait
        self.url: str | None = where if isinstance(where, str) else None
        self._found = threading.Event()
        self._ready = False
        self._next_prune = 0.0
        self._failing = False
        self._problem = "the database was still starting"
        # a thread of its own for the writes: a flush may come from a thread with an event loop running (a
        # SIGTERM's, in the middle of the work), where asyncio.run cannot be called
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="frobozz-spans-writer")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connection: Any = None
        if self.url is not None:
            self._found.set()
        else:
            assert not isinstance(where, str)
            threading.Thread(target=self._find, args=(where,), name="frobozz-spans-database", daemon=True).start()

    def _find(self, where: Callable[[], Awaitable[str]]) -> None:
        try:
            self.url = asyncio.run(where())  # type: ignore[arg-type]  # where() is a coroutine: async def
        except Exception as e:  # noqa: BLE001 - no database: spans are not kept, said once at the first batch
            log.debug("tracing: no database to keep spans in: %s", e)
            self._problem = f"no database to keep them in ({type(e).__name__})"
        finally:
            self._found.set()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            if not self._found.wait(self.find_wait) or self.url is None:
                raise ConnectionError(self._problem)
            work = self._write(self.url, [_row(s) for s in spans])
            try:
                written = self._writer.submit(self._run, work)
            except RuntimeError:  # the interpreter is exiting (the SDK's atexit flush): the pool takes no more
                self._run(work)  # work, and this thread runs no event loop: written here
            else:
                written.result(WRITE_WAIT)
        except Exception as e:  # noqa: BLE001 - the SDK's thread must not die of it (a database away)
            if not self._failing:
                log.warning(
                    "tracing: spans cannot be kept in the database (%s: %s); they are dropped. Said once.",
                    type(e).__name__,
                    e if isinstance(e, ConnectionError) else "see the database's own log",
                )
            self._failing = True
            return SpanExportResult.FAILURE
        self._failing = False
        return SpanExportResult.SUCCESS

    @property
    def failing(self) -> bool:
        """Whether the last batch could not be kept."""
        return self._failing

    def _run(self, work: Awaitable[None]) -> None:
        """On the writer's thread, in its own event loop, kept from batch to batch with its connection."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(work)

    async def _write(self, url: str, rows: list[tuple[Any, ...]]) -> None:
        if self._connection is None or self._connection.is_closed():
            self._connection = await asyncpg.connect(url, timeout=10)  # one, kept: not a new backend per batch
        connection = self._connection
        try:
            if not self._ready:
                await connection.execute(schema())
                self._ready = True
            if time.monotonic() >= self._next_prune:
                await prune(connection, self.keep_days)
                self._next_prune = time.monotonic() + PRUNE_EVERY
            try:  # COPY: a fraction of the server's and the driver's work per row of an INSERT each
                await connection.copy_records_to_table("trace_spans", records=rows, columns=_COLUMNS)
            except asyncpg.UniqueViolationError:  # a span kept already (a batch sent again): one by one, skipping it
                await connection.executemany(_INSERT, rows)
        except BaseException:
            self._connection = None  # the next batch connects afresh
            connection.terminate()
            raise

    def shutdown(self) -> None:
        def close() -> None:
            if self._connection is not None and self._loop is not None:
                self._loop.run_until_complete(self._connection.close(timeout=5))
            if self._loop is not None:
                self._loop.close()

        try:
            self._writer.submit(close).result(10)
        except Exception as e:  # noqa: BLE001 - closing is best effort: the process is ending
            log.debug("tracing: the span store's connection did not close cleanly: %s", e)
        self._writer.shutdown(wait=False)


async def prune(connection: Any, keep_days: float) -> int:
    """Delete the spans past their time; how many went."""
    done = await connection.execute(
        "DELETE FROM trace_spans WHERE started_at < now() - make_interval(secs => $1)", keep_days * 86400.0
    )
    return int(done.split()[-1])


async def run_spans(connection: Any, run_id: str) -> list[dict[str, Any]]:
    """Every kept span of the traces a run's spans are in (its session, its turns, and what is under them),
    in order of start; nothing when none were kept (or tracing never kept any here)."""
    return await _traces_with(connection, "run_id", run_id)


async def session_spans(connection: Any, session_id: str) -> list[dict[str, Any]]:
    """The same for a claude session (a chat's, an agent session's), by its id."""
    return await _traces_with(connection, "session_id", session_id)


async def _traces_with(connection: Any, column: str, value: str) -> list[dict[str, Any]]:
    assert column in ("run_id", "session_id")
    try:
        rows = await connection.fetch(
            f"SELECT * FROM trace_spans WHERE trace_id IN (SELECT trace_id FROM trace_spans WHERE {column} = $1) "
            "ORDER BY started_at, span_id",
            value,
        )
    except asyncpg.UndefinedTableError:
        return []
    return [{**dict(r), "attributes": json.loads(r["attributes"])} for r in rows]
