"""A run's directory: written turn by turn, so a crash or a kill loses nothing already played.

run.json        the run's settings and its state (atomic rewrites)
lock            held (flock) by the process playing the run, so that no two play it at once
turns.jsonl     one line per game turn, appended before the next turn starts (with --memory, what
                memory recalled, stored, compacted and handed off around it)
snapshot.json   the game after the last turn (atomic), in text mode
transcript.md   the readable transcript, appended turn by turn
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from frobozz._files import atomic_write

_RUN_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{4,}")


class RunNotFoundError(Exception):
    pass


class RunDamagedError(RunNotFoundError):
    """A run directory whose run.json is there but cannot be read as a run's (cut off, not JSON, not a run's
    fields): the run is not lost from sight, it is said to be damaged, and where. Its snapshot.json so damaged
    is said the same way (RunStore.snapshot)."""

    def __init__(self, run_id: str, path: Path, why: object) -> None:
        self.run_id, self.path, self.why = run_id, path, str(why)
        super().__init__(f"run {run_id} is damaged: its record {path} cannot be read ({self.why})")


class RunFinishedError(Exception):
    """A `--resume` of a run that has ended (won, died, or its budget spent and not raised): nothing to play."""


class RunBusyError(Exception):
    """A run another process is playing now: two players of one run would interleave its turns."""


LOCK = "lock"
HOLD_TRIES = 10  # a reader's probe holds the lock for microseconds: a hold tries again before calling it busy
TAIL_BYTES = 64 * 1024  # how much of turns.jsonl's end is read first for its last turn (more if a line is longer)


@dataclass(frozen=True)
class TurnRecord:
    turn: int
    command: str
    text: str
    score: int | None
    moves: int | None
    location: str | None
    done: bool
    won: bool
    reply: str = ""
    cost_usd: float = 0.0
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    # with --memory: what memory did around this turn, so a reader sees why a move was made
    recalled: list[str] = field(default_factory=list)  # shown under the status line before this reply
    stored: list[str] = field(default_factory=list)  # stored with cortex during this reply
    compacted: bool = False  # a context window began before this reply
    handoff: str | None = None  # the letter written during this reply, relayed to the next window


@dataclass
class RunInfo:
    run_id: str
    game: str
    story: str
    story_md5: str
    title: str
    player: str
    mode: str
    model: str | None
    max_turns: int | None
    max_cost: float | None
    max_seconds: float | None
    multi: bool
    prompt_file: str | None
    created: str
    claude_session_id: str | None = None
    claude_config_dir: str | None = None
    autosave_slot: str | None = None
    game_session: str | None = None  # tools mode: the game server's session (shared when the run is queued)
    status: str = "running"
    reason: str | None = None
    turns: int = 0
    score: int | None = None
    max_score: int | None = None
    moves: int | None = None
    won: bool = False
    done: bool = False
    cost_usd: float = 0.0
    corrections: int = 0
    errors: int = 0  # times a worker's play of the run ended on an error (see runner._queue.ATTEMPTS)
    memory_namespace: str | None = None  # None: played without memory
    memory_session: str | None = None  # the memory loop's session: its seen-set and archive
    memories_recalled: int = 0
    memories_stored: int = 0  # with cortex during the turns, and the lessons
    lessons: int = 0  # lessons kept at the end
    compactions: int = 0
    handoffs: int = 0
    start_location: str | None = None  # where the game began, before the first command (the map's first room)
    ended: str | None = None  # when it last ended (finished, stopped or failed); None while it plays


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


class RunStore:
    """A run's directory on this machine: run.json, the turns, snapshots and the transcript, written turn by turn."""

    def __init__(self, directory: Path, info: RunInfo) -> None:
        self.dir = directory
        self.info = info
        self._lock: int | None = None

    @classmethod
    def create(cls, runs_dir: Path, info: RunInfo, *, hold: bool = False) -> RunStore:
        """A new run's directory; `hold`: held (see `hold`) before its run.json says it is running."""
        directory = runs_dir / info.run_id
        directory.mkdir(parents=True, exist_ok=False)
        store = cls(directory, info)
        if hold:
            store.hold()
        try:
            store.save_info()
        except BaseException:
            store.let_go()
            raise
        return store

    def hold(self) -> None:
        """Take the run for this process until `let_go()`: an flock on its lock file, which the kernel lets go
        however the process ends (a resume after a kill -9 takes it at once). RunBusyError when another
        process plays the run from this directory now (before, two resumes both played it, their turns
        interleaved in one record). A lock is this machine's: a worker elsewhere has a copy of its own."""
        if self._lock is not None:
            return
        path, flags = self.dir / LOCK, os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:  # (for writing where it may: NFS takes an exclusive flock only so; read-only for another account's)
            try:
                fd = os.open(path, os.O_RDWR | flags, 0o644)
            except PermissionError:
                fd = os.open(path, os.O_RDONLY | flags, 0o644)
        except OSError as e:
            raise RunNotFoundError(f"run {self.info.run_id} cannot be taken up here: {e}") from e
        try:
            for attempt in range(HOLD_TRIES):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._lock = fd
                    return
                except BlockingIOError:
                    if attempt < HOLD_TRIES - 1:
                        time.sleep(0.01)  # (a reader's probe: microseconds)
        except OSError as e:
            os.close(fd)
            raise RunNotFoundError(f"run {self.info.run_id} cannot be taken up here: {e}") from e
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        raise RunBusyError(
            f"run {self.info.run_id} is being played by another process now: wait for it to end, or stop it first"
        )

    def reload(self) -> None:
        """run.json as it is now (read again once the run is held: another process may have played it on)."""
        self.info = RunStore.open(self.dir.parent, self.info.run_id).info

    def let_go(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.let_go()

    def played_now(self) -> bool | None:
        """Whether a process holds the run now (None: cannot tell: no lock file, as in a run made before there
        were locks, or one not this account's to open). Only reads: the probe holds a shared lock for an instant."""
        try:
            fd = os.open(self.dir / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def as_it_stands(self) -> RunInfo:
        """The run as its directory has it now. run.json is written when a run starts or resumes and when it ends,
        not every turn: a run it says is running shows the score, turns, moves and cost of its last committed turn
        (as it was when it started, none yet); one no process plays from here (it was killed) is stopped, as its
        committed turns left it."""
        info = self.info
        if info.status != "running":
            return info
        last = self.last_turn()
        killed = self.played_now() is False
        if killed:  # (a crash may have cut the last line off after its snapshot: the snapshot has that turn)
            kept = self._snapshot_turn()
            if kept is not None and (last is None or kept.turn > last.turn):
                last = kept
        if last is not None:
            info = replace(
                info,
                turns=last.turn,
                score=last.score,
                moves=last.moves,
                cost_usd=max(info.cost_usd, last.cost_usd),  # (as a resume counts it)
            )
        if killed:
            info = replace(info, status="stopped", reason="killed", turns=last.turn if last else 0)
        return info

    def last_turn(self) -> TurnRecord | None:
        """The last turn in turns.jsonl, read from the file's end (not the whole of a long run's); a torn last
        line (a crash's, or one being written now) is passed over."""
        try:
            f = (self.dir / "turns.jsonl").open("rb")
        except FileNotFoundError:
            return None
        with f:
            end = f.seek(0, os.SEEK_END)
            size = TAIL_BYTES
            while True:
                start = max(0, end - size)
                f.seek(start)
                lines = f.read(end - start).split(b"\n")
                for line in reversed(lines if start == 0 else lines[1:]):  # (a window's first line: cut off)
                    record = _turn_of(line)
                    if record is not None:
                        return record
                if start == 0:
                    return None
                size *= 4

    @classmethod
    def open(cls, runs_dir: Path, run_id: str) -> RunStore:
        if not _RUN_ID.fullmatch(run_id or ""):
            raise RunNotFoundError(f"{run_id[:80]!r} is not a run id (they look like 20261122-013000-a1b2c3)")
        path = runs_dir / run_id / "run.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunNotFoundError(f"no run {run_id} in {runs_dir}") from None
        except (OSError, ValueError) as e:
            raise RunDamagedError(run_id, path, e) from e
        if not isinstance(data, dict):
            raise RunDamagedError(run_id, path, f"a JSON {type(data).__name__}, not a run's fields")
        known = {f.name for f in fields(RunInfo)}
        try:
            return cls(path.parent, RunInfo(**{k: v for k, v in data.items() if k in known}))
        except TypeError as e:  # (a field a run has is missing)
            raise RunDamagedError(run_id, path, e) from e

    @property
    def transcript(self) -> Path:
        return self.dir / "transcript.md"

    def save_info(self) -> None:
        atomic_write(self.dir / "run.json", json.dumps(asdict(self.info), indent=2).encode())

    def record(self, turn: TurnRecord, snapshot: dict[str, Any] | None) -> None:
        """Commit one turn: the snapshot first (it carries the turn too), then the turn line."""
        if snapshot is not None:
            atomic_write(self.dir / "snapshot.json", json.dumps({"record": asdict(turn), **snapshot}).encode())
        with (self.dir / "turns.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(turn)) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite(self, records: list[TurnRecord], snapshot: dict[str, Any] | None) -> None:
        """Make the turns and the snapshot these (a run taken up from the database's record of it)."""
        lines = "".join(json.dumps(asdict(r)) + "\n" for r in records)
        atomic_write(self.dir / "turns.jsonl", lines.encode())
        if snapshot is None:
            (self.dir / "snapshot.json").unlink(missing_ok=True)
        else:
            atomic_write(self.dir / "snapshot.json", json.dumps(snapshot).encode())

    def turns(self, *, repair: bool = True) -> list[TurnRecord]:
        """Every committed turn, including one whose line a crash cut off after its snapshot (written back to
        turns.jsonl unless `repair=False`: a reader beside a live run must not write)."""
        records: dict[int, TurnRecord] = {}
        path = self.dir / "turns.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = TurnRecord(**json.loads(line))
                except (ValueError, TypeError):
                    continue  # the torn last line of a crash
                records[record.turn] = record
        last = self._snapshot_turn()
        if last is not None:
            if last.turn not in records:
                records[last.turn] = last
                if repair:
                    with path.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(asdict(last)) + "\n")
        return [records[k] for k in sorted(records)]

    def snapshot(self) -> dict[str, Any] | None:
        """The game after the last turn (None: no turn played in text mode yet). RunDamagedError, naming the file,
        when it cannot be read (cut off, not JSON, not an object, its turn not a turn's): it was a traceback."""
        path = self.dir / "snapshot.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise RunDamagedError(self.info.run_id, path, e) from e
        if not isinstance(data, dict):
            raise RunDamagedError(self.info.run_id, path, f"a JSON {type(data).__name__}, not a game's snapshot")
        if "record" in data:
            try:
                TurnRecord(**data["record"])
            except TypeError as e:  # (not an object, or not a turn's fields)
                raise RunDamagedError(self.info.run_id, path, f"its turn is not a turn's: {e}") from e
        return data

    def damage(self) -> RunDamagedError | None:
        """What is damaged in the run's files that its readers pass over (its snapshot.json; the turns read from
        turns.jsonl), to be said beside what is shown; None: nothing."""
        try:
            self.snapshot()
        except RunDamagedError as e:
            return e
        return None

    def _snapshot_turn(self) -> TurnRecord | None:
        """The turn the snapshot carries (None: none, or the snapshot is damaged: see `damage`)."""
        try:
            snapshot = self.snapshot()
        except RunDamagedError:
            return None
        return TurnRecord(**snapshot["record"]) if snapshot and "record" in snapshot else None


def _turn_of(line: bytes) -> TurnRecord | None:
    try:
        return TurnRecord(**json.loads(line))
    except (ValueError, TypeError):
        return None
