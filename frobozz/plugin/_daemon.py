"""The per-user memory daemon the plugin's hooks talk to: one JSON line in, one JSON line out, on a Unix
socket in a folder only its user can enter. The first hook starts it; it keeps the memory service (the
database pool, the embedding model) and a sidecar claude warm, and ends itself when no hook has called
for a while, or on SIGTERM/SIGINT, removing its socket. One runs per data directory: a second one started
at the same moment sees the lock taken and leaves."""

from __future__ import annotations

import fcntl
import itertools
import json
import logging
import os
import shutil
import signal
import stat
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from ..engine import EngineOptions, EngineSettings, Sidecar
from ..memory import DatabaseError, MemoryService, MemorySettings, MemoryStoreError
from ._hook import OFF_ENV, off_marks
from ._hook_memory import HookMemory, project_namespace
from .exceptions import PluginError
from .settings import PluginSettings

if TYPE_CHECKING:
    from ._mcp import ServerFactories

log = logging.getLogger("frobozz.plugin")
MAX_REQUEST = 16 * 1024 * 1024


def private_folder(folder: Path) -> Path:
    """`folder`, made if needed, refused unless it is this user's own and closed to everyone else (a folder
    planted in /tmp by another account would let it read the prompts)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PluginError(f"{folder} is not a private folder of this user's: remove it and try again")
    return folder


@contextmanager
def single(lock_path: Path) -> Iterator[bool]:
    """Whether this process holds the daemon's lock (held until the block ends)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield True
    finally:
        os.close(fd)


def daemon_pid(socket_path: Path) -> int | None:
    """The running daemon's pid, or None when none holds the lock."""
    lock_path = socket_path.with_suffix(".lock")
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _serves(pid: int, socket_path: Path) -> bool:
    """Whether `pid` is a memory daemon that may serve `socket_path`, by its command line where the system shows
    one (Linux's /proc); elsewhere the lock it holds is the proof."""
    if not Path("/proc/self/cmdline").exists():
        return True
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False  # gone already
    sockets = [a.removeprefix("--socket=") for a in args if a.startswith("--socket=")]
    sockets += [b for a, b in itertools.pairwise(args) if a == "--socket"]
    return "daemon" in args and (not sockets or str(socket_path) in sockets)


def stop_daemon(socket_path: Path, *, wait: float = 30.0) -> int | None:
    """Stop the daemon serving `socket_path`: SIGTERM, then SIGKILL when it has not gone within `wait` seconds (a
    wedged one, whose socket is then removed). Its pid, or None when none ran. Only the lock's holder is
    signalled, and only when its command line is a memory daemon's for this socket (never a process that
    took a stale pid's number)."""
    pid = daemon_pid(socket_path)
    if not pid or not _serves(pid, socket_path):
        return None
    for sig, limit in ((signal.SIGTERM, wait), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + limit
        while daemon_pid(socket_path) == pid and time.monotonic() < end:
            time.sleep(0.02)
        if daemon_pid(socket_path) != pid:
            break
    else:
        raise PluginError(f"the memory daemon (pid {pid}) did not stop, even when killed")
    if sig == signal.SIGKILL:
        with single(socket_path.with_suffix(".lock")) as mine:
            if mine:  # (not when a hook has started the next one meanwhile)
                _remove_socket(socket_path)
    return pid


def _remove_socket(socket_path: Path) -> None:
    """A daemon's socket and its off marks, as its end leaves them (the next may say again why it was off)."""
    socket_path.unlink(missing_ok=True)
    shutil.rmtree(off_marks(socket_path), ignore_errors=True)


def parse_request(data: bytes) -> dict[str, Any]:
    """A hook's request (`{"event": …, "input": …, "namespace": …}`), or why it is refused."""
    try:
        request = json.loads(data)
    except ValueError as e:
        raise PluginError("the hook's request is not JSON") from e
    if not isinstance(request, dict) or not isinstance(request.get("event"), str):
        raise PluginError("the hook's request names no event")
    return request


class MemoryDaemon:
    """The per-user daemon the plugin's hooks talk to over a Unix socket (see the module)."""

    def __init__(
        self,
        settings: PluginSettings,
        socket_path: Path | None = None,
        memory: MemorySettings | None = None,
        servers: ServerFactories | None = None,
    ) -> None:
        self.settings = settings
        self.socket_path = socket_path or settings.socket
        self.memory = memory or MemorySettings()
        self.servers = dict(servers or {})  # the MCP servers the plugin's relay may ask for
        self._service: MemoryService | None = None
        self._serving = 0  # MCP sessions open: the daemon is not idle while a claude holds one
        self._sidecar: Sidecar | None = None
        self._tg: TaskGroup | None = None
        self._last = 0.0

    async def _ask(self, prompt: str) -> str:
        """A question for the sidecar claude, started on first use (no hook's answer waits for it to start)."""
        if self._sidecar is None:
            assert self._tg is not None
            options = EngineOptions(tools=(), env={OFF_ENV: "1"}, setting_sources=())
            self._sidecar = Sidecar(options, EngineSettings(), timeout=self.settings.plugin_ask_timeout)
            self._tg.start_soon(self._sidecar.keep_warm)
        return await self._sidecar.ask(prompt)

    @asynccontextmanager
    async def backend(self, *, warm: bool = True) -> AsyncIterator[tuple[HookMemory, TaskGroup]]:
        """The hooks' memory (the service, the sidecar, background work) for as long as the block runs: the
        daemon's, or the hub's (`hook_app`, which does not warm the model for a plugin that may never call)."""
        service = self._service = MemoryService(self.memory)
        hooks = HookMemory(service, ask=self._ask, deadline=self.settings.plugin_deadline)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                hooks.background(tg)
                if warm:
                    tg.start_soon(self._warm, service)
                yield hooks, tg
                tg.cancel_scope.cancel()
        finally:
            if self._sidecar is not None:
                self._sidecar.close()
            await service.aclose()

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        private_folder(self.socket_path.parent)
        with single(self.socket_path.with_suffix(".lock")) as mine:
            if not mine:
                log.info("another memory daemon serves %s", self.socket_path)
                task_status.started()
                return
            self.socket_path.unlink(missing_ok=True)  # a daemon killed with -9 leaves its socket behind
            try:
                listener = await anyio.create_unix_listener(self.socket_path, mode=0o600)
                async with self.backend() as (hooks, tg), listener:
                    tg.start_soon(self._signals, tg)
                    tg.start_soon(self._idle, tg)
                    log.info("memory daemon %d listening on %s", os.getpid(), self.socket_path)
                    task_status.started()
                    await listener.serve(lambda stream: self._answer(stream, hooks), task_group=tg)
            finally:
                _remove_socket(self.socket_path)

    async def _signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                log.info("memory daemon stopping")
                tg.cancel_scope.cancel()
                return

    async def _idle(self, tg: TaskGroup) -> None:
        self._last = anyio.current_time()
        while True:
            left = self._last + self.settings.plugin_idle - anyio.current_time()
            if self._serving:
                left = self.settings.plugin_idle
            elif left <= 0:
                log.info("memory daemon idle for %.0f s: stopping", self.settings.plugin_idle)
                tg.cancel_scope.cancel()
                return
            await anyio.sleep(min(left, 60))

    async def _warm(self, service: MemoryService) -> None:
        """The database and the embedding model, readied while the first hook's answer is written."""
        try:
            store = await service.store()
            await store.embedder.embed(["warming up"])
        except Exception as e:  # noqa: BLE001 - the hooks report it when they need them
            log.warning("memory daemon: not warmed (%s)", type(e).__name__)

    async def _answer(self, stream: SocketStream, hooks: HookMemory) -> None:
        try:
            await self._answer_one(stream, hooks)
        except Exception as e:  # noqa: BLE001 - a failing connection never takes the daemon (all memory) down
            log.warning("memory daemon: a connection failed (%s)", type(e).__name__)

    async def _answer_one(self, stream: SocketStream, hooks: HookMemory) -> None:
        self._last = anyio.current_time()
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                request = await self._read(buffered)
                if request["event"] == "mcp":
                    await self._serve_mcp(request, buffered, stream)
                    return
                reply = await self.reply(request, hooks)
            except PluginError as e:
                reply = {"error": str(e)}
            try:
                await stream.send(json.dumps(reply).encode() + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the hook gave up waiting: it let the prompt through already
        self._last = anyio.current_time()

    async def _read(self, stream: BufferedByteReceiveStream) -> dict[str, Any]:
        """The request's first line (what follows it, on an MCP relay's connection, is left in the buffer)."""
        data = b""
        with anyio.move_on_after(10):
            try:
                data = await stream.receive_until(b"\n", MAX_REQUEST)
            except anyio.DelimiterNotFound as e:
                raise PluginError("the hook's request is too big") from e
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                pass
        return parse_request(data)

    async def _serve_mcp(
        self, request: dict[str, Any], buffered: BufferedByteReceiveStream, stream: SocketStream
    ) -> None:
        """One of the plugin's MCP servers for one claude, on this connection until it closes: the project's
        namespace by default (the one the hooks recall from), claude's session as cortex's seen-session."""
        name, project, session = request.get("server"), request.get("project"), request.get("session")
        factory = self.servers.get(name) if isinstance(name, str) else None
        if factory is None or self._service is None:
            raise PluginError(f"no such MCP server here: {str(name)[:40]!r}")
        namespace = request.get("namespace") or project_namespace(project if isinstance(project, str) else "")
        # the daemon's own environment names the claude whose relay started it: never the session of this one
        overrides: dict[str, Any] = {"cortex_default_namespace": namespace, "session_id": None}
        if isinstance(session, str) and 0 < len(session) <= 100:
            overrides["cortex_seen_session"] = overrides["session_id"] = session  # (handoff signs letters with it)
        try:
            server = factory(overrides, self._service)
        except ValueError as e:  # settings that do not validate (a namespace too long)
            raise PluginError(f"the {name} server could not start ({type(e).__name__})") from e
        from ._mcp import serve_on  # here: the MCP SDK's import was most of `plugin status`'s start (0.6 s)

        self._serving += 1
        try:
            await serve_on(server, buffered, stream)
        finally:
            self._serving -= 1
            self._last = anyio.current_time()

    async def reply(self, request: dict[str, Any], hooks: HookMemory) -> dict[str, Any]:
        event = request["event"]
        if event == "ping":
            return {"pid": os.getpid()}
        namespace = request.get("namespace")
        try:
            with anyio.fail_after(self.settings.limits.get(event, 5.0)):
                return {
                    "context": await hooks.handle(
                        event, request.get("input"), namespace if isinstance(namespace, str) else None
                    )
                }
        except TimeoutError as e:
            raise PluginError(f"the {event} hook's memory work took too long") from e
        except DatabaseError as e:
            raise PluginError("the memory database cannot be reached") from e
        except MemoryStoreError as e:
            raise PluginError(str(e)[:300]) from e
        except (OSError, RuntimeError) as e:
            log.warning("memory daemon: %s failed (%s)", event, type(e).__name__)
            raise PluginError(f"the memory daemon failed ({type(e).__name__})") from e
