"""The claude subprocess and its pipes: a line framer with a size cap, writes under a lock, a
bounded stderr tail drained in the background, and a close that escalates stdin → wait →
terminate → kill. Knows nothing of JSON or of what the lines mean.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from .._children import as_account, dying_with_parent
from .exceptions import CLINotFoundError, ProcessError

log = logging.getLogger("frobozz.engine")

_LIVE: set[Process] = set()


@atexit.register
def _kill_live_children() -> None:
    """A parent that exits without closing must not leave claude processes behind."""
    for process in list(_LIVE):
        if process.returncode is None:
            try:
                process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass


class OversizedLine(bytes):
    """The start of a stdout line that was longer than the cap (the rest was dropped)."""


class CLIProcess:
    def __init__(
        self, *, max_line_bytes: int, stderr_tail_bytes: int, on_stderr: Callable[[str], None] | None = None
    ) -> None:
        self.max_line_bytes = max_line_bytes
        self._on_stderr = on_stderr
        self._stderr_cap = stderr_tail_bytes
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._process: Process | None = None
        self._write_lock = anyio.Lock()
        self._stderr_done = anyio.Event()

    def tell_stderr_to(self, callback: Callable[[str], None] | None) -> None:
        """Each stderr line from now on to `callback` (a warm spare taken over by a session with its own)."""
        self._on_stderr = callback

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    @property
    def stderr_tail(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    async def start(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None,
        task_group: TaskGroup,
        user: int | None = None,
        group: int | None = None,
    ) -> None:
        """Spawn `command`; with `user` (and `group`), as that account, with no supplementary groups."""
        argv = dying_with_parent(command)
        switch: dict[str, Any] = {}
        if user is not None:
            switched = as_account(command, user, user if group is None else group)
            argv, switch = (switched, {}) if switched else (argv, {"user": user, "group": group, "extra_groups": []})
        try:
            self._process = await anyio.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                **switch,
            )
        except PermissionError as e:
            if user is not None:
                raise ProcessError(
                    f"cannot run {command[0]} as uid {user}: {e.strerror} (only root may switch "
                    "users, and that account must be able to reach the program and the cwd)"
                ) from e
            raise CLINotFoundError(f"cannot run {command[0]}: {e.strerror}") from e
        except FileNotFoundError as e:
            raise CLINotFoundError(f"cannot run {command[0]}: {e.strerror}") from e
        except OSError as e:
            raise ProcessError(f"cannot start {command[0]}: {e}") from e
        _LIVE.add(self._process)
        task_group.start_soon(self._drain_stderr)

    async def _drain_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        try:
            partial = b""
            async for chunk in self._process.stderr:
                if self._on_stderr is not None:
                    *lines, partial = (partial + chunk).split(b"\n")
                    self._tell(lines)
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > self._stderr_cap and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
            if partial:
                self._tell([partial])
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()

    def _tell(self, lines: list[bytes]) -> None:
        """Each stderr line to the consumer's callback; one that raises is logged, not fatal to the drain."""
        assert self._on_stderr is not None
        for line in lines:
            try:
                self._on_stderr(line.decode("utf-8", "replace").rstrip("\r"))
            except Exception:  # a consumer's callback must not stop the drain
                log.exception("the stderr callback failed")

    async def write(self, line: str) -> None:
        """Write one line; a closed or dead process raises ProcessError."""
        async with self._write_lock:
            process = self._process
            if process is None or process.stdin is None:
                raise ProcessError("claude is not running")
            try:
                await process.stdin.send(line.encode("utf-8") + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
                raise ProcessError(
                    "claude's stdin is closed: the process has exited",
                    exit_code=process.returncode,
                    stderr=self.stderr_tail,
                ) from e

    async def lines(self) -> AsyncIterator[bytes]:
        """stdout, one line at a time. A line over the cap comes as an OversizedLine of its start."""
        assert self._process is not None and self._process.stdout is not None
        buffer = b""
        skipping: OversizedLine | None = None
        try:
            async for chunk in self._process.stdout:
                buffer += chunk
                while True:
                    end = buffer.find(b"\n")
                    if end < 0:
                        break
                    line, buffer = buffer[:end], buffer[end + 1 :]
                    if skipping is not None:
                        yield skipping
                        skipping = None
                    elif line:
                        yield line
                if len(buffer) > self.max_line_bytes:
                    skipping = skipping or OversizedLine(buffer[:200])
                    buffer = b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        if skipping is not None:
            yield skipping
        elif buffer.strip():
            yield buffer

    async def wait(self) -> int:
        assert self._process is not None
        code = await self._process.wait()
        with anyio.move_on_after(1):
            await self._stderr_done.wait()  # so the stderr tail is complete when reported
        return code

    async def close(self, timeout: float) -> int | None:  # noqa: ASYNC109 - then SIGTERM, then SIGKILL
        """Close stdin and wait; then SIGTERM, then SIGKILL. Shielded, so cancellation cannot orphan it."""
        process = self._process
        if process is None:
            return None
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(timeout):  # a write stuck on a full pipe must not hold the close up
                async with self._write_lock:
                    if process.stdin is not None:
                        try:
                            await process.stdin.aclose()
                        except (anyio.BrokenResourceError, OSError):
                            pass
            with anyio.move_on_after(timeout):
                await process.wait()
            if process.returncode is None:
                self._signal_group(signal.SIGTERM)
                with anyio.move_on_after(5):
                    await process.wait()
            if process.returncode is None:
                self._signal_group(signal.SIGKILL)
                await process.wait()
            await process.aclose()
        _LIVE.discard(process)
        return process.returncode

    def kill(self) -> None:
        """Kill at once (the process and anything it started), as a crash would."""
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        try:
            os.killpg(self._process.pid, sig)  # its own session: MCP servers it started go too
        except (ProcessLookupError, PermissionError):
            try:
                self._process.send_signal(sig)
            except ProcessLookupError:
                pass
