"""Where shared game sessions live between calls, so that any of several server processes can answer
for any session: the data directory (one machine), or Postgres (many machines, when a database is
configured). A holder knows a session's copy by its mark: it picks the session up again only when the
mark has moved. Either also serialises the calls on one session across processes, for the whole call: Postgres
with an advisory lock, the directory with an exclusive `flock` on the session's lock file."""

from __future__ import annotations

import fcntl
import json
import os
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import asyncpg
from asyncpg.pool import PoolConnectionProxy

from frobozz._files import atomic_write
from frobozz.games import GameError, GameLibrary, GameSession, StoryInfo, Turn, read_story, replay_journal

if TYPE_CHECKING:
    from frobozz.memory import MemorySettings

SHARED_UNDO = 10  # turns undo can reach back after another process picks a session up (~19 kB each)
LOCK_WAIT = 60.0  # seconds a call waits for a session another call holds (a call takes well under one)


@dataclass(frozen=True)
class Shared:
    """A session as its latest holder left it."""

    story: StoryInfo
    snapshot: dict[str, Any]
    turns: list[Turn]
    mark: object


class Share(Protocol):
    def lock(self, session_id: str) -> Any: ...  # an async context manager
    async def mark(self, session_id: str) -> object | None: ...
    async def load(self, session_id: str) -> Shared: ...
    async def save(self, session: GameSession) -> object: ...
    async def delete(self, session_id: str) -> None: ...
    async def aclose(self) -> None: ...


class _LocalLocks:
    """Calls on one session take turns in this process."""

    def __init__(self) -> None:
        self._locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)

    @asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        """The session to this call alone in this process; a GameError after LOCK_WAIT seconds of waiting (a
        holder that hangs must not hang every call after it)."""
        turn, ours = self._locks[session_id], False
        with anyio.move_on_after(LOCK_WAIT):
            await turn.acquire()
            ours = True
        if not ours:
            raise GameError(_busy(session_id))
        try:
            yield
        finally:
            turn.release()
            if not turn.locked() and not turn.statistics().tasks_waiting:
                del self._locks[session_id]  # (no call on the session left here)


class FileShare(_LocalLocks):
    """`<sessions dir>/<id>.live.json` beside the session's journal; the mark is the file's (inode, mtime, size):
    each save is a new file (written beside it, then renamed), so a copy saved within the same clock tick and at
    the same size as the one before still has another mark. Calls on one session take turns in this process,
    then one of them waits for `<id>.lock`, which every process on the folder locks (the lock goes with the
    open file: a process that dies mid-call lets go of it)."""

    def __init__(self, sessions_dir: Path) -> None:
        super().__init__()
        self.dir = sessions_dir

    @asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        """The session to this call alone, in every process on the folder; a GameError after LOCK_WAIT seconds
        of waiting, here or for the file (a holder that hangs must not hang every call after it)."""
        async with super().lock(session_id):  # one call per session here waits for the file
            fd = await self._lock_file(session_id)
            try:
                yield
            finally:
                os.close(fd)  # (lets go of the lock)

    async def _lock_file(self, session_id: str) -> int:
        """An open descriptor of the session's lock file, locked. The lock is asked for without blocking, again
        and again until it is had (so no thread waits in the kernel past a cancel or the bound), and is kept
        only on the file still at the path (an ended session's lock file is deleted under its lock)."""
        path = self.dir / f"{session_id}.lock"
        self.dir.mkdir(parents=True, exist_ok=True)
        pause = 0.001
        with anyio.move_on_after(LOCK_WAIT):
            while True:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    while True:
                        try:
                            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                            break
                        except BlockingIOError:
                            await anyio.sleep(pause)
                            pause = min(pause * 2, 0.02)
                    if _same_file(fd, path):
                        return fd
                except BaseException:
                    os.close(fd)
                    raise
                os.close(fd)  # locked a deleted file: the path has another now
        raise GameError(_busy(session_id))

    def _path(self, session_id: str) -> Path:
        return self.dir / f"{session_id}.live.json"

    async def mark(self, session_id: str) -> object | None:
        try:
            st = os.stat(self._path(session_id))
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    async def load(self, session_id: str) -> Shared:
        path = self._path(session_id)
        try:
            mark = await self.mark(session_id)
            record = json.loads(path.read_text(encoding="utf-8"))
            _, turns = replay_journal(self.dir / f"{session_id}.jsonl")
            return Shared(read_story(Path(record["story"])), record["snapshot"], turns, mark)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise GameError(f"game session {session_id} could not be picked up from {path}: {e}") from e

    async def save(self, session: GameSession) -> object:
        snapshot = session.snapshot(undo=SHARED_UNDO)
        atomic_write(
            self._path(session.id), json.dumps({"story": str(session.story.path), "snapshot": snapshot}).encode()
        )
        return await self.mark(session.id)

    async def delete(self, session_id: str) -> None:
        """(Inside `lock`: a call that waited for the deleted lock file finds the session ended.)"""
        self._path(session_id).unlink(missing_ok=True)
        (self.dir / f"{session_id}.lock").unlink(missing_ok=True)

    async def aclose(self) -> None:
        pass


class DatabaseShare(_LocalLocks):
    """Table `game_sessions`; the mark is the row's version. Opened at first use. Calls on one session take
    turns in this process before one of them waits for the database's lock, so that waiters hold no more than
    one of the pool's connections per session (eight calls waiting on a session held elsewhere took them
    all, and calls on every other session waited with them). A call that holds a session reads and writes it
    on the connection that holds the lock: eight sessions held at once would otherwise wait for a ninth."""

    def __init__(self, memory: MemorySettings, library: GameLibrary) -> None:
        self.memory = memory
        self.library = library
        super().__init__()
        self._pool: asyncpg.Pool | None = None
        self._opening = anyio.Lock()
        self._holding: dict[str, PoolConnectionProxy] = {}  # session id -> the connection holding its lock

    async def _open(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                from frobozz.memory import DatabaseError, migrated_pool

                try:
                    self._pool = await migrated_pool(self.memory, __package__, "game_migrations", size=8)
                except DatabaseError as e:
                    raise GameError(f"the game sessions' database: {e}") from e
        return self._pool

    @asynccontextmanager
    async def lock(self, session_id: str) -> AsyncIterator[None]:
        """The session to this call alone, in every process on the database (the lock goes with its
        connection: a process that dies mid-call lets go of it); a GameError after LOCK_WAIT seconds of
        waiting, here or for the database (a holder that hangs must not hang every call after it)."""
        async with super().lock(session_id):  # one call per session here waits in Postgres, on one connection
            pool = await self._open()
            async with _database_errors(), pool.acquire() as connection:
                await connection.execute(f"SET lock_timeout = {int(LOCK_WAIT * 1000)}")  # (reset by the pool)
                try:
                    await connection.execute(
                        "SELECT pg_advisory_lock(hashtextextended($1, 0))", f"frobozz-game:{session_id}"
                    )
                except asyncpg.LockNotAvailableError as e:
                    raise GameError(_busy(session_id)) from e
                self._holding[session_id] = connection
                try:
                    yield
                finally:
                    del self._holding[session_id]
                    with anyio.CancelScope(shield=True):
                        await connection.execute(
                            "SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"frobozz-game:{session_id}"
                        )

    async def _on(self, session_id: str) -> asyncpg.Pool | PoolConnectionProxy:
        """Where a query on the session runs: the connection holding its lock, if this process holds it."""
        return self._holding.get(session_id) or await self._open()

    async def mark(self, session_id: str) -> object | None:
        on = await self._on(session_id)
        async with _database_errors():
            return await on.fetchval("SELECT version FROM game_sessions WHERE session_id = $1", session_id)

    async def load(self, session_id: str) -> Shared:
        on = await self._on(session_id)
        async with _database_errors():
            row = await on.fetchrow("SELECT * FROM game_sessions WHERE session_id = $1", session_id)
        if row is None:
            raise GameError(f"no game session {session_id!r} in the database")
        try:
            turns = [Turn(**t) for t in json.loads(row["turns"])]
            return Shared(
                self._story(row["story"], row["story_md5"]), json.loads(row["snapshot"]), turns, row["version"]
            )
        except (ValueError, TypeError) as e:
            raise GameError(f"game session {session_id} could not be picked up from the database: {e}") from e

    async def save(self, session: GameSession) -> object:
        on = await self._on(session.id)
        async with _database_errors():
            return await on.fetchval(
                "INSERT INTO game_sessions (session_id, story, story_md5, snapshot, turns) VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT (session_id) DO UPDATE SET snapshot = EXCLUDED.snapshot, turns = EXCLUDED.turns, "
                "version = game_sessions.version + 1, updated = now() RETURNING version",
                session.id,
                str(session.story.path),
                session.story.md5,
                json.dumps(session.snapshot(undo=SHARED_UNDO)),
                json.dumps([asdict(t) for t in session.turns]),
            )

    async def delete(self, session_id: str) -> None:
        on = await self._on(session_id)
        async with _database_errors():
            await on.execute("DELETE FROM game_sessions WHERE session_id = $1", session_id)

    async def aclose(self) -> None:
        if self._pool is not None:
            from frobozz.memory import close_pool

            await close_pool(self._pool)
            self._pool = None

    def _story(self, path: str, md5: str) -> StoryInfo:
        """The session's story file here: at the path it was started from, or the same file among this
        machine's games."""
        try:
            story = read_story(path)
            if story.md5 == md5:
                return story
        except GameError:
            pass
        for story in self.library.stories():
            if story.md5 == md5:
                return story
        raise GameError(f"this server has no story file with checksum {md5} (the session's game)")


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino)


def _busy(session_id: str) -> str:
    return f"game session {session_id} is busy: another call on it has not ended in {LOCK_WAIT:g} s; try again"


@asynccontextmanager
async def _database_errors() -> AsyncIterator[None]:
    from frobozz.memory import DATABASE_ERRORS

    try:
        yield
    except DATABASE_ERRORS as e:
        raise GameError(f"the game sessions' database failed: {e}") from e


def share_for(settings: Any, library: GameLibrary) -> Share | None:
    """None when sessions stay in their process; else the database when one is configured
    (FROBOZZ_DATABASE_URL), or the data directory."""
    if not settings.game_shared_sessions:
        return None
    # memory (numpy, the embedder: ~0.2 s of CPU) is imported only by a server whose sessions are shared
    from frobozz.memory import MemorySettings

    memory = MemorySettings()
    if memory.database_url is not None:
        return DatabaseShare(memory, library)
    return FileShare(settings.sessions_dir)
