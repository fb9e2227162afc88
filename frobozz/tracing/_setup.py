"""Tracing on: the OpenTelemetry SDK and its OTLP exporter, configured once at a process's start.

Everything comes from OpenTelemetry's own environment variables, read by the SDK itself
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `_HEADERS`, `_TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_TRACES_SAMPLER`, …); what the SDK would only warn about and skip (a malformed header list, a
protocol this exporter does not speak) is a clear error here, before anything starts. Spans leave in
batches from the SDK's own thread: an endpoint that is down or slow costs the run nothing, and its
spans are dropped with one warning. At the exit what still waits is sent in a bounded time, with no retry
after a failed attempt (the exporter's own backoff held a process whose backend was down ~7 s); spans the
backend did not get are said in one line on stderr.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from .. import _spans as S
from ._otlp import LeanOTLPExporter
from .exceptions import TracingConfigError
from .settings import TracingSettings

if TYPE_CHECKING:
    from ._local import LocalSpans

log = logging.getLogger("frobozz.tracing")
DEFAULT_ENDPOINT = "http://localhost:4318"
EXIT_WAIT = 3.0  # seconds the spans still waiting at the exit may take to reach the backend (one that answers: ms)
LOCAL_EXIT_WAIT = 15.0  # the same for the local store, whose first batch may wait for the embedded Postgres
_PROTOCOL = "http/protobuf"
_INHERITED = "FROBOZZ_TRACE_OTEL"  # the OTEL_* settings of the process that turned tracing on, as JSON
_HEADER_KEY = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an HTTP token (RFC 9110)
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.sdk.trace.export",
)


def check_headers(environ: Mapping[str, str]) -> dict[str, str]:
    """The OTLP header list (`key=value,…`, values URL-encoded) as a dict; a malformed one is an error that
    names the variable and the member, never its value (headers carry keys and tokens)."""
    headers: dict[str, str] = {}
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        raw = environ.get(name)
        if raw is None or not raw.strip():
            continue
        members = raw.split(",")
        for index, member in enumerate(members, 1):
            if not member.strip():
                continue
            key, sep, value = member.partition("=")
            where = f"{name} is malformed: its member {index} of {len(members)}"
            if not sep:
                raise TracingConfigError(
                    f"{where} has no '=': write key=value pairs separated by commas, values "
                    f"URL-encoded (e.g. authorization=Bearer%20TOKEN)"
                )
            if not _HEADER_KEY.match(key.strip()):
                raise TracingConfigError(f"{where} has a key that is not an HTTP header name")
            decoded = urllib.parse.unquote(value.strip())
            if any(c in decoded for c in "\r\n\0"):
                raise TracingConfigError(f"{where} ({key.strip()}) has a line break in its value")
            headers[key.strip().lower()] = decoded
    return headers


def traces_endpoint(environ: Mapping[str, str]) -> str:
    """Where spans are sent: the traces endpoint as given, or the base endpoint's /v1/traces."""
    own = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    url = own or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    try:
        parsed = urllib.parse.urlsplit(url)
        usable = parsed.scheme in ("http", "https") and bool(parsed.hostname) and (parsed.port or 0) >= 0
    except ValueError:  # an IPv6 host left open, a port that is no number (a traceback before)
        usable = False
    if not usable:
        name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if own else "OTEL_EXPORTER_OTLP_ENDPOINT"
        raise TracingConfigError(f"{name} is not an http(s) URL: {_shown(url)}")
    return url if own else url.rstrip("/") + "/v1/traces"


def _shown(url: str) -> str:
    """A URL without its credentials, for a message."""
    try:
        parsed = urllib.parse.urlsplit(url)
        host, port = parsed.hostname or "", parsed.port
    except ValueError:  # not parsed: what follows its last '@', where credentials would end
        return url.rpartition("@")[2][:40]
    return (
        urllib.parse.urlunsplit((parsed.scheme, host + (f":{port}" if port else ""), parsed.path, "", ""))
        if host
        else url[:40]
    )


def check_protocol(environ: Mapping[str, str]) -> None:
    """Refuses an OTLP protocol other than HTTP/protobuf, the one Frobozz exports, with the setting to use."""
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or _PROTOCOL
    ).strip()
    if protocol != _PROTOCOL:
        raise TracingConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not spoken here: Frobozz exports "
            f"OTLP over HTTP, set it to {_PROTOCOL} (every OTLP backend takes it, on port 4318)"
        )


class WarnOnce(SpanExporter):
    """The OTLP exporter, its failures said once (and again only after it has worked in between): a
    backend that is down must not fill the log, and its spans are dropped, not kept in memory."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.failing = False
        self.dropped = 0
        self.sent = 0
        self.ending = False

    def end(self) -> None:
        """The process is ending: an export makes one attempt, no retry after a wait, and a failure is left to
        the exit's own line (`Tracing.shutdown`)."""
        self.ending = True
        hurry = getattr(self.inner, "hurry", None)
        if callable(hurry):
            hurry()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as e:  # noqa: BLE001 - the SDK's thread must not die of it
            log.debug("OTLP export raised: %s", e)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.FAILURE:
            self.dropped += len(spans)
            if not self.failing and not self.ending:
                log.warning(
                    "tracing: spans cannot be sent to %s (is the backend up?); they are dropped and the "
                    "run goes on. Said once.",
                    _shown(self.endpoint),
                )
            self.failing = True
            return result
        self.sent += len(spans)
        if self.failing:
            log.info("tracing: %s takes spans again (%d were dropped)", _shown(self.endpoint), self.dropped)
            self.failing = False
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class SessionOnEverySpan(SpanProcessor):
    """Every span started under one that carries claude's `session.id` carries it too (a game's act, a recall,
    a permission question under a turn), so a backend's search by session finds the whole of it. A parent in
    another process (the engine's tool call, above an MCP server's span) sends the id as W3C baggage."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if S.SESSION_ID in (span.attributes or {}):  # its own (the engine's spans all have it): nothing to look up
            return
        parent = trace.get_current_span(parent_context)
        session = getattr(parent, "attributes", None) or {}
        value = (session.get(S.SESSION_ID) if hasattr(session, "get") else None) or S.session_of(parent_context)
        if value:
            span.set_attribute(S.SESSION_ID, value)


class Tally(SpanProcessor):
    """How many spans ended that an exporter is to send (the sampled ones, as the batch processor takes them)."""

    def __init__(self) -> None:
        self.ended = 0
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            with self._lock:
                self.ended += 1


@dataclass
class Tracing:
    """Tracing as configured for this process: its provider (to add a processor) and the endpoint."""

    provider: TracerProvider
    endpoint: str
    exporter: WarnOnce
    tally: Tally = field(default_factory=Tally)
    local: LocalSpans | None = None  # the local store's exporter, when spans are kept in Postgres too
    _flushing: threading.Thread | None = field(default=None, init=False, repr=False)
    # each processor ended at the exit, with the seconds it may take then (beyond the shutdown's own)
    _ending: list[tuple[SpanProcessor, float]] = field(default_factory=list, init=False, repr=False)
    _ended: bool = field(default=False, init=False, repr=False)
    _end_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def add(self, processor: SpanProcessor, *, exit_wait: float = 0.0) -> None:
        """A processor more, flushed and shut down at the exit: for the shutdown's time, or `exit_wait` seconds
        when that is longer."""
        self.provider.add_span_processor(processor)
        self._ending.append((processor, exit_wait))

    def flush_on(self, signum: int) -> None:
        """A process sent `signum` sends its last spans first (for at most five seconds), then does what the
        signal would have done. Code that handles the signal itself (a worker, a web server) replaces this
        while it runs, and ends through its own exit, which flushes too. Only the main thread sets handlers."""
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signum)

        def on_signal(received: int, frame: Any) -> None:
            self._flush_from_a_thread(5.0)
            if callable(previous):
                previous(received, frame)  # (SIGINT's default raises KeyboardInterrupt)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(signum, on_signal)

    def _flush_from_a_thread(self, timeout: float) -> None:
        """Send what waits, from a thread of its own, for at most `timeout` seconds. A second signal that comes
        meanwhile (claude's SIGTERM, 100 ms after its SIGINT) waits for the same flush: one run in its handler
        would wait on a lock the SDK's flush holds in the first, below it on the same thread, for ever."""
        if self._flushing is None or not self._flushing.is_alive():  # (one under way is waited for)
            self._flushing = threading.Thread(
                target=self.provider.force_flush, args=(int(timeout * 1000),), name="frobozz-flush", daemon=True
            )
            self._flushing.start()
        self._flushing.join(timeout)

    def shutdown(self, timeout: float = EXIT_WAIT) -> None:
        """Send what is waiting, then stop (run at the process's exit; once): at most `timeout` seconds for the
        backend (the local store's first batch may wait longer for its database), every processor at once, and
        no retry after a failed attempt. Spans the backend did not get are said in one line on stderr."""
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
        self.exporter.end()
        start = time.monotonic()
        ending = []
        for processor, wait in self._ending:  # each in a thread: an export to a backend that hangs is not waited for
            bound = max(timeout, wait)
            thread = threading.Thread(target=_end, args=(processor, bound), name="frobozz-spans-end", daemon=True)
            thread.start()
            ending.append((processor, thread, start + bound))
        for _, thread, until in ending:
            thread.join(max(0.0, until - time.monotonic()))
        local_done = all(not t.is_alive() for p, t, _ in ending if getattr(p, "span_exporter", None) is self.local)
        self._say_undelivered(kept=self.local is not None and local_done and not self.local.failing)

    def _say_undelivered(self, kept: bool) -> None:
        undelivered = self.tally.ended - self.exporter.sent
        if undelivered <= 0:
            return
        line = (
            f"tracing: {undelivered} of {self.tally.ended} spans did not reach {_shown(self.endpoint)} (is the "
            f"backend up?); {'they are kept in the local database only' if kept else 'they are dropped'}"
        )
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr closed: nobody to tell
            pass


def _end(processor: SpanProcessor, timeout: float) -> None:
    try:
        processor.force_flush(int(timeout * 1000))
        processor.shutdown()
    except Exception as e:  # noqa: BLE001 - the process is ending: a processor's failure is not its exit's
        log.debug("tracing: a span processor did not end cleanly: %s", e)


_current: Tracing | None = None


def configure(
    service: str = "frobozz",
    settings: TracingSettings | None = None,
    *,
    force: bool = False,
    environ: MutableMapping[str, str] | None = None,
    database: Callable[[], Awaitable[str]] | None = None,
) -> Tracing | None:
    """Tracing on for this process when `FROBOZZ_TRACE` (or `--trace`, which sets it) says so; None when off
    (the API stays a no-op: nothing is made, nothing exported). Children inherit the setting (claude, and
    through it the MCP servers it starts), and claude's own telemetry is pointed at the same endpoint.
    Spans are kept in FROBOZZ_DATABASE_URL's Postgres, or else in the one `database` finds when the first
    batch is written (the CLI's: the embedded Postgres, the default everywhere in Frobozz)."""
    global _current
    environ = os.environ if environ is None else environ
    settings = settings or TracingSettings()
    if not (settings.trace or force) or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if _current is not None:
        return _current
    inherit(environ)
    check_protocol(environ)
    check_headers(environ)
    endpoint = traces_endpoint(environ)
    detected = Resource.create()
    resource = (
        detected
        if not str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service")
        else detected.merge(Resource({SERVICE_NAME: service}))
    )
    # its sampler from OTEL_TRACES_SAMPLER, as the SDK reads it; ended at the exit by Tracing.shutdown, bounded
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    exporter = WarnOnce(LeanOTLPExporter(endpoint=endpoint, headers=check_headers(environ) or None), endpoint)
    if settings.trace_warn_once:
        for name in _EXPORTER_LOGGERS:  # their per-batch errors: said once by WarnOnce instead
            logging.getLogger(name).setLevel(logging.CRITICAL)
    provider.add_span_processor(SessionOnEverySpan())  # first: the exporters see the id
    tracing = Tracing(provider, endpoint, exporter)
    provider.add_span_processor(tracing.tally)
    tracing.add(BatchSpanProcessor(exporter))
    where = settings.database_url.get_secret_value() if settings.database_url is not None else database
    if where is not None and settings.trace_keep_days > 0:
        from ._local import LocalSpans

        tracing.local = LocalSpans(where, settings.trace_keep_days)
        tracing.add(BatchSpanProcessor(tracing.local), exit_wait=LOCAL_EXIT_WAIT)
    trace.set_tracer_provider(provider)
    environ["FROBOZZ_TRACE"] = "true"
    environ[_INHERITED] = json.dumps({k: v for k, v in environ.items() if k.startswith("OTEL_")})
    if settings.trace_claude:
        for key, value in claude_telemetry().items():
            environ.setdefault(key, value)
    _current = tracing
    atexit.register(tracing.shutdown)
    _current.flush_on(signal.SIGTERM)  # (an MCP server when claude exits, a supervisor's stop)
    return _current


def inherit(environ: MutableMapping[str, str]) -> None:
    """The parent's OTEL_* settings, for a process whose own were taken from it on the way: claude starts
    its MCP servers without the OTEL_* variables, so a Frobozz server started by claude reads them here."""
    try:
        passed = json.loads(environ.get(_INHERITED) or "{}")
    except ValueError:
        return
    if isinstance(passed, dict):
        for key, value in passed.items():
            if isinstance(key, str) and key.startswith("OTEL_") and isinstance(value, str):
                environ.setdefault(key, value)


def claude_telemetry() -> dict[str, str]:
    """claude's own telemetry (its documented variables): metrics and events over OTLP/HTTP to the same
    endpoint; each carries claude's `session.id`, the id Frobozz's spans carry too."""
    return {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": _PROTOCOL,
    }


def current() -> Tracing | None:
    """The tracing this process set up, or None when it traces nothing."""
    return _current
