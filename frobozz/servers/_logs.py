"""MCP logging for every Frobozz server: the log lines the servers write (the `frobozz` loggers) while a
request is handled also go to the client that sent it, as `notifications/message` on that request's stream,
at the level the client chose: `logging/setLevel` on 2025-11-25 and before (for the connection: a stdio
client's whole session, one request in stateless HTTP), the request's own `_meta` log level on 2026-07-28
(the SDK applies it; without it nothing is sent). The loggers are lowered to that level only while such a
request is in flight, and stderr shows what it showed before."""

from __future__ import annotations

import logging
import math
import threading
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, get_args

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.connection import allowed_log_levels
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # debug … emergency, least severe first
DEFAULT: LoggingLevel = "warning"  # before a client sets one: what stderr shows by default too
ROOT = "frobozz"
_STATE_KEY = "frobozz.log_level"
_PYTHON = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 9,
}


def mcp_level(levelno: int) -> LoggingLevel:
    """The MCP level of a Python record: the most severe one at or under its number."""
    return [name for name in LEVELS if _PYTHON[name] <= levelno][-1] if levelno >= logging.DEBUG else "debug"


@dataclass
class _Sink:
    send: MemoryObjectSendStream[tuple[LoggingLevel, str, str]]
    level: LoggingLevel
    thread: int


_sink: ContextVar[_Sink | None] = ContextVar("frobozz_mcp_log_sink", default=None)


class _Forward(logging.Handler):
    """Hands each record logged in a request's context (its tasks and worker threads) to that request."""

    def createLock(self) -> None:
        """No lock: a worker thread's record waits in `emit` for the event loop, and a lock held meanwhile would
        stop the loop's next record, and the loop with it, for ever. `emit` shares nothing that needs one."""
        self.lock = None  # logging's acquire and release skip a handler without one

    def emit(self, record: logging.LogRecord) -> None:
        sink = _sink.get()
        level = mcp_level(record.levelno)
        if sink is None or LEVELS.index(level) < LEVELS.index(sink.level):
            return
        item = (level, record.name, record.getMessage())
        try:
            if threading.get_ident() == sink.thread:
                sink.send.send_nowait(item)
            else:  # a worker thread of anyio's: the stream belongs to the event loop
                anyio.from_thread.run_sync(sink.send.send_nowait, item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
            pass  # the request has been answered, or a thread that is not anyio's: stderr still has it


_handler = _Forward()


def _install() -> None:
    logger = logging.getLogger(ROOT)
    if _handler not in logger.handlers:
        logger.addHandler(_handler)


class _Lowered:
    """The `frobozz` loggers make records down to the lowest level a request in flight asked for, and only
    while one is in flight: a client that once asked for debug lines does not leave every later `log.debug`
    making a record for nobody. stderr never shows more than it did: the root's handlers that took every level
    the root let through are pinned to that level before the loggers first go under it. A level somebody else
    sets meanwhile is the one they come back to."""

    def __init__(self) -> None:
        self._asked: Counter[int] = Counter()  # the Python levels of the requests in flight, each counted
        self._own: int | None = None  # the loggers' own level while lowered, put back when the last one ends
        self._set = logging.NOTSET  # the level this lowered them to
        self._lock = threading.Lock()

    @contextmanager
    def down_to(self, level: LoggingLevel) -> Iterator[None]:
        wanted = _PYTHON[level]
        with self._lock:
            self._asked[wanted] += 1
            self._apply()
        try:
            yield
        finally:
            with self._lock:
                self._asked[wanted] -= 1
                if not self._asked[wanted]:
                    del self._asked[wanted]
                self._apply()

    def _apply(self) -> None:
        logger = logging.getLogger(ROOT)
        if self._own is not None and logger.level != self._set:
            self._own = logger.level  # set by somebody else while lowered: theirs is the level to come back to
        own = logger.level if self._own is None else self._own
        made = own or logging.getLogger().getEffectiveLevel()  # what the loggers make when nobody asks
        target = min(self._asked, default=made)
        if target >= made:  # the loggers make these records anyway (the common case), or nobody asks
            if self._own is not None:
                logger.setLevel(own)
                self._own = None
            return
        if self._own is None:
            self._own = own
            _pin_stderr()
        if logger.level != target:
            logger.setLevel(target)
        self._set = target


def _pin_stderr() -> None:
    root = logging.getLogger()
    shown = root.getEffectiveLevel()
    for handler in root.handlers:
        if handler.level == logging.NOTSET:
            handler.setLevel(shown)


_lowered = _Lowered()


def _connection_state(ctx: Any) -> dict[str, Any] | None:
    # MCPServer gives a low-level handler no public way to its connection's `state` (an SDK gap, reported upstream)
    connection = getattr(ctx.session, "_connection", None)
    return getattr(connection, "state", None)


def offer_logging(server: MCPServer, default: LoggingLevel = DEFAULT) -> None:
    """Serve `logging/setLevel` (which advertises the logging capability) and forward log lines to clients."""
    _install()

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        state = _connection_state(ctx)
        if state is not None:
            state[_STATE_KEY] = params.level  # the connection's requests forward lines from that level on
        return EmptyResult()

    async def forward(ctx: Any, call_next: Any) -> Any:
        if ctx.request_id is None or ctx.method in ("initialize", "logging/setLevel"):
            return await call_next(ctx)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # the level the request's `_meta` asked for, if any
            allowed = allowed_log_levels(ctx.protocol_version, ctx.meta)
            if not allowed:
                return await call_next(ctx)
            level: LoggingLevel = min(allowed, key=LEVELS.index)
        else:
            level = (_connection_state(ctx) or {}).get(_STATE_KEY, default)
        send, receive = anyio.create_memory_object_stream[tuple[LoggingLevel, str, str]](math.inf)

        async def deliver() -> None:
            _sink.set(None)  # what sending a line logs is not sent in turn
            async with receive:
                async for line in receive:
                    await _notify(ctx, *line)

        failure: Exception | None = None
        token = _sink.set(_Sink(send, level, threading.get_ident()))
        try:
            with _lowered.down_to(level):  # else a line under the loggers' level (warning by default) is never made
                async with anyio.create_task_group() as tg:
                    tg.start_soon(deliver)
                    try:
                        result = await call_next(ctx)
                    except Exception as e:  # noqa: BLE001 - re-raised after the group, not in an ExceptionGroup
                        failure = e  # the SDK would not know for an MCPError (its code and message lost)
                    finally:
                        send.close()  # the lines so far still go, before the answer
        finally:
            _sink.reset(token)
        if failure is not None:
            raise failure
        return result

    # MCPServer serves only what the 2026 revision kept; the SDK's own advice for logging/setLevel is the
    # low-level server's add_request_handler, which MCPServer does not expose (an SDK gap, reported upstream)
    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    server.middleware.append(forward)


async def _notify(ctx: Any, level: LoggingLevel, name: str, text: str) -> None:
    with warnings.catch_warnings():  # deprecated at 2026-07-28 (SEP-2577), and still the 2025-11-25 way
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        sent = ctx.session.send_log_message(level, text, name, related_request_id=ctx.request_id)
    try:
        await sent
    except Exception as e:  # noqa: BLE001 - a log line the client cannot take never fails the request
        logging.getLogger("mcp.frobozz").debug("log line not sent to the client: %s", e)
