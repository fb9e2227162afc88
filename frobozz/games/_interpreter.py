"""The caller's side of an interpreter worker: spawn it, call it, and survive its death."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import tempfile
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from .._children import dying_with_parent
from .._scratch import ScratchFolder
from .exceptions import GameError, InterpreterCrashedError

_LEN = struct.Struct(">I")
WORKER = os.path.join(os.path.dirname(__file__), "_worker.py")  # run as a script: see its docstring
_STDERR_TAIL = 4000


class WorkerFoundDeadError(InterpreterCrashedError):
    """The worker had died since the last call (killed, out of memory): the call was never sent."""


class WorkerProcess:
    """One `frobozz.games._worker` child; calls are serialised, each bounded by a timeout."""

    def __init__(self, *, timeout: float) -> None:
        self.timeout = timeout
        self._process: Process | None = None
        self._exit_code: int | None = None  # the last dead child's, for the report
        self._reader: BufferedByteReceiveStream | None = None
        self._stderr = tempfile.TemporaryFile()  # a file, so a chatty child can never block on it
        # the child's working folder: a story's own SAVE (or junk code that reaches the opcode) writes
        # `<story>.qzl` where it runs, which must never be the caller's folder; one left by a killed caller is
        # removed by the next caller's
        self._scratch = ScratchFolder("frobozz-game-")
        self._lock = anyio.Lock()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        self._process = await anyio.open_process(
            dying_with_parent([sys.executable, "-P", WORKER]),  # -P: its folder is not put on sys.path
            cwd=self._scratch.path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        assert self._process.stdout is not None
        self._reader = BufferedByteReceiveStream(self._process.stdout)

    async def call(self, op: str, *args: Any, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - a hung child is killed
        """Send one request and wait for its answer (within `timeout`, else the worker's own); a dead or hung
        child raises InterpreterCrashedError."""
        limit = self.timeout if timeout is None else timeout
        async with self._lock:
            if self._process is not None and self._process.returncode is not None:
                # it died since the last call: said as a crash, so the caller puts its game back; a fresh child
                # started here would have no story loaded
                await self._kill()
                raise self._crashed("the interpreter process had died since the last call", WorkerFoundDeadError)
            if self._process is None:
                await self.start()
            process, reader = self._process, self._reader
            assert process is not None and process.stdin is not None and reader is not None
            data = pickle.dumps((op, args), protocol=pickle.HIGHEST_PROTOCOL)
            try:
                with anyio.fail_after(limit):
                    await process.stdin.send(_LEN.pack(len(data)) + data)
                    (size,) = _LEN.unpack(await reader.receive_exactly(_LEN.size))
                    status, value = pickle.loads(await reader.receive_exactly(size))
            except TimeoutError:
                await self._kill()
                raise self._crashed(f"the interpreter did not answer within {limit:g} s") from None
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.IncompleteRead,
                anyio.ClosedResourceError,
                OSError,
            ) as e:
                await self._kill()
                raise self._crashed("the interpreter process died") from e
            if status != "ok":
                raise GameError(f"the interpreter refused {op!r}: {value}")
            return value

    def _crashed(
        self, what: str, kind: type[InterpreterCrashedError] = InterpreterCrashedError
    ) -> InterpreterCrashedError:
        code = self._exit_code
        self._stderr.seek(0, 2)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - _STDERR_TAIL))
        tail = self._stderr.read().decode("utf-8", "replace").strip()
        detail = f" (exit code {code})" if code is not None else ""
        return kind(f"{what}{detail}", exit_code=code, stderr=tail)

    async def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
        self._exit_code = process.returncode  # for the report; the next call starts a new child

    async def aclose(self) -> None:
        """Close stdin so the child exits by itself; kill it if it does not within a second."""
        process, self._process = self._process, None
        if process is not None:
            with anyio.CancelScope(shield=True):
                if process.stdin is not None:
                    await process.stdin.aclose()
                with anyio.move_on_after(1.0):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                await process.aclose()
        self._stderr.close()
        self._scratch.remove()
