"""GameSession: one game in its own interpreter process, with snapshots, undo, saves and a map.

Every turn keeps the interpreter's state, so undo is exact and a crashed interpreter is replaced
by a new one put back to the last good turn. In-game save/restore/restart/quit never reach the
interpreter's file prompts: they become the session's own actions or are refused.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, replace
from datetime import UTC, datetime
from enum import Enum

import anyio

from ._catalogue import by_md5
from ._interpreter import WorkerFoundDeadError, WorkerProcess
from ._journal import Journal
from ._map import GameMap
from ._saves import SaveInfo, SaveStore, decode_state, encode_state
from ._story import StoryInfo
from ._text import clean_output, looks_like_game_over
from ._turns import Turn
from .exceptions import CommandError, GameError, GameSessionClosedError, InterpreterCrashedError, SaveError
from .settings import GamesSettings

MAX_COMMAND_CHARS = 198  # the interpreter's input buffer
DEFAULT_SLOT = "quicksave"
VALID_ACTIONS_STEPS = 6  # valid_actions may take this many steps' timeout


class GameSessionState(Enum):
    PLAYING = "playing"
    OVER = "over"  # won, or lost for good: undo, restore or restart go on from here
    CLOSED = "closed"


def check_command(command: object) -> str:
    """The command as the interpreter should get it, or CommandError saying what is wrong."""
    if not isinstance(command, str):
        raise CommandError("a command must be text")
    if len(command) > MAX_COMMAND_CHARS:
        raise CommandError(
            f"command is {len(command)} characters long; the game reads at most "
            f"{MAX_COMMAND_CHARS}: give one short command such as 'open mailbox'"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in command):
        raise CommandError("command contains control characters (newlines, tabs, escapes): send one plain line")
    if not command.isascii():
        raise CommandError("command contains non-ASCII characters, which Z-machine games cannot read")
    text = " ".join(command.split())
    if not text:
        raise CommandError("empty command: say what to do, for example 'look', 'north' or 'take lamp'")
    return text


NOT_SENT = frozenset({"quit", "q", "script", "unscript"})  # verbs `act` never sends: they end or script the game


def _check_playable(command: object) -> str:
    """As `check_command`, and CommandError for the verbs `act` never sends to the game (NOT_SENT)."""
    text = check_command(command)
    verb = text.lower().partition(" ")[0]
    if verb in NOT_SENT:
        raise CommandError(
            f"{verb!r} is not sent to the game: end the session with end_game, or use restart to begin again"
        )
    return text


class GameSession:
    """Use `await GameSession.open(story, settings)`; every method is safe to call concurrently."""

    def __init__(
        self,
        story: StoryInfo,
        settings: GamesSettings,
        worker: WorkerProcess,
        *,
        seed: int | None,
        session_id: str | None = None,
    ) -> None:
        self.id = session_id or secrets.token_hex(8)
        self.story = story
        self.seed = seed
        self.state = GameSessionState.PLAYING
        self.supported = False
        self.max_score: int | None = None
        self.walkthrough: list[str] = []
        self._worker = worker
        self._saves = SaveStore(settings.saves_dir, story.md5)
        self._journal = Journal(settings.sessions_dir / f"{self.id}.jsonl")
        self._turns: list[Turn] = []
        self._states: list[tuple | None] = []  # the interpreter state after each turn; None: not kept
        self._opening: tuple[Turn, tuple]

    @classmethod
    async def open(cls, story: StoryInfo, settings: GamesSettings, *, seed: int | None = None) -> GameSession:
        self, raw = await cls._start(story, settings, seed, None)
        try:
            self._journal.write(
                "start",
                session=self.id,
                story=str(story.path),
                md5=story.md5,
                started=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            self._push(self._turn(raw, None))
        except BaseException:
            await self.aclose(journal=False)
            raise
        self._states[-1] = raw["state"]
        self._opening = (self._turns[0], raw["state"])  # restart goes here, whatever was restored since
        return self

    @classmethod
    async def reopen(
        cls, story: StoryInfo, settings: GamesSettings, session_id: str, snapshot: dict, turns: list[Turn]
    ) -> GameSession:
        """Session `session_id`, begun by another process (its journal is already written), picked up
        here at `snapshot`; nothing is journalled twice."""
        self, raw = await cls._start(story, settings, None, session_id)
        opening = self._turn(raw, None)
        self._opening = (opening, raw["state"])
        try:
            await self.resume(snapshot, turns or [opening], journal=False)
        except BaseException:
            await self.aclose(journal=False)
            raise
        return self

    @classmethod
    async def _start(
        cls, story: StoryInfo, settings: GamesSettings, seed: int | None, session_id: str | None
    ) -> tuple[GameSession, dict]:
        worker = WorkerProcess(timeout=settings.step_timeout)
        try:  # any failure to make the session closes its interpreter
            try:
                raw = await worker.call("open", str(await anyio.Path(story.path).resolve()), seed)
            except GameError as e:
                raise type(e)(f"{story.path.name} could not be started: {e}") from e
            self = cls(story, settings, worker, seed=seed, session_id=session_id)
        except BaseException:
            await worker.aclose()
            raise
        self.supported = raw["supported"]
        known = by_md5(story.md5)
        self.max_score = raw["max_score"] or (known.max_score if known else None)
        self.walkthrough = raw["walkthrough"]
        return self, raw

    # -- reading -----------------------------------------------------------------------------
    @property
    def current(self) -> Turn:
        return self._turns[-1]

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(self._turns)

    def history(self, last: int = 20) -> list[Turn]:
        return self._turns[-last:] if last > 0 else []

    def map(self) -> GameMap:
        return GameMap.from_path((t.command, t.location) for t in self._turns)

    def list_saves(self) -> list[SaveInfo]:
        return self._saves.list()

    # -- playing -----------------------------------------------------------------------------
    async def act(self, command: str) -> Turn:
        """Run one command; meta-commands (save, restore, restart, undo, quit) are handled here."""
        self._check_open()
        text = _check_playable(command)
        verb, _, rest = text.lower().partition(" ")
        if verb in ("save", "restore", "load"):
            slot = rest.strip() or DEFAULT_SLOT
            if verb == "save":
                info = await self.save(slot)
                return replace(self.current, text=f"[Saved to slot {info.slot!r} at turn {info.turn}.]")
            turn = await self.restore(slot)
            return replace(turn, text=f"[Restored slot {slot!r}.]\n\n{turn.text}")
        if verb == "restart":
            return await self.restart()
        if verb == "undo":
            return await self.undo(1)
        if self.state is GameSessionState.OVER:
            raise GameError("the game is over: undo, restore a save or restart to play on")
        raw = await self._call("step", text)
        turn = self._turn(raw, text)
        self._push(turn)
        self._states[-1] = raw["state"]
        return turn

    async def peek(self, command: str) -> Turn:
        """The game's answer to `command` without advancing it (the state is put back after)."""
        self._check_open()
        raw = await self._call("peek", check_command(command))
        return replace(self.current, text=clean_output(raw["text"]))

    async def undo(self, steps: int = 1) -> Turn:
        self._check_open()
        if steps < 1:
            raise CommandError("undo needs a number of turns of at least 1")
        available = len(self._turns) - 1
        while available and self._states[-1 - available] is None:
            available -= 1
        if steps > available:
            raise GameError(f"cannot undo {steps} turn(s): {available} can be undone here")
        await self._call("set_state", self._states[-1 - steps])
        del self._turns[-steps:], self._states[-steps:]
        self._journal.write("undo", steps=steps)
        self._set_state_from(self.current)
        return self.current

    async def restart(self) -> Turn:
        self._check_open()
        turn, state = self._opening
        await self._call("set_state", state)
        self._turns, self._states = [turn], [state]
        self._journal.reset("restart", self._turns)
        self.state = GameSessionState.PLAYING
        return self.current

    async def save(self, slot: str) -> SaveInfo:
        self._check_open()
        state = self._states[-1]
        assert state is not None
        return self._saves.write(slot, self._turns, state)

    async def restore(self, slot: str) -> Turn:
        self._check_open()
        record = self._saves.read(slot)
        await self._call("set_state", record.state)
        self._turns = list(record.turns)
        self._states = [None] * (len(self._turns) - 1) + [record.state]
        self._journal.reset("restore", self._turns, slot=slot)
        self._set_state_from(self.current)
        return self.current

    def snapshot(self, *, undo: int = 0) -> dict:
        """The current turn and interpreter state as JSON, for a caller that keeps its own record;
        with `undo`, the kept states of up to that many turns before it too, so undo works after a resume."""
        state = self._states[-1]
        assert state is not None
        earlier = (
            [
                {"turn": t.number, "state": encode_state(s)}
                for t, s in zip(self._turns[-1 - undo : -1], self._states[-1 - undo : -1], strict=True)
                if s is not None
            ]
            if undo
            else []
        )
        return {
            "story_md5": self.story.md5,
            "turn": asdict(self.current),
            "state": encode_state(state),
            **({"undo": earlier} if earlier else {}),
        }

    async def resume(self, snapshot: dict, turns: list[Turn], *, journal: bool = True) -> Turn:
        """Put the game back to `snapshot` (from `snapshot()`), with `turns` as its history;
        `journal=False` when the journal already says so (another process wrote it)."""
        self._check_open()
        if snapshot.get("story_md5") != self.story.md5:
            raise SaveError("the snapshot belongs to another story file")
        try:
            state = decode_state(snapshot["state"])
            last = Turn(**snapshot["turn"])
            earlier = {int(u["turn"]): decode_state(u["state"]) for u in snapshot.get("undo", [])}
        except (KeyError, TypeError, ValueError) as e:
            raise SaveError(f"the snapshot is corrupt ({type(e).__name__}: {e})") from e
        await self._call("set_state", state)
        self._turns = [t for t in turns if t.number < last.number] + [last]
        self._states = [earlier.get(t.number) for t in self._turns[:-1]] + [state]
        self._set_state_from(last)
        if journal:
            self._journal.reset("resume", self._turns)
        return last

    async def valid_actions(self) -> list[str]:
        self._check_open()
        # jericho tries every candidate action on a copy of the world: many steps' work, so many steps' time
        return list(await self._call("valid_actions", timeout=VALID_ACTIONS_STEPS * self._worker.timeout))

    async def aclose(self, *, journal: bool = True) -> None:
        """Stop the interpreter; `journal=False` when the session goes on elsewhere."""
        if self.state is not GameSessionState.CLOSED:
            self.state = GameSessionState.CLOSED
            if journal:
                self._journal.write("end")
            self._journal.close()
            await self._worker.aclose()

    # -- inside ------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.state is GameSessionState.CLOSED:
            raise GameSessionClosedError(f"game session {self.id} has ended: start a new game")

    async def _call(self, op: str, *args: object, timeout: float | None = None) -> dict:  # noqa: ASYNC109 - the worker's
        try:
            return await self._worker.call(op, *args, timeout=timeout)
        except InterpreterCrashedError as e:
            await self._recover()
            unsent = isinstance(e, WorkerFoundDeadError)
            what = f"{e}" if unsent else f"{e} while running {op!r}"
            if self.state is GameSessionState.CLOSED:
                after = "a new interpreter could not be started, so the session has ended: start a new game"
            else:
                after = f"a new interpreter was started and the game put back to turn {self.current.number}"
                if unsent:
                    after += f": {op!r} was never sent, so nothing was done: try again"
            raise InterpreterCrashedError(f"{what}; {after}", exit_code=e.exit_code, stderr=e.stderr) from e

    async def _recover(self) -> None:
        """Start a new interpreter at the last kept state; if even that fails, close the session."""
        state = self._states[-1]
        try:
            await self._worker.call("open", str(await anyio.Path(self.story.path).resolve()), self.seed)
            if state is not None:
                await self._worker.call("set_state", state)
        except GameError:
            await self.aclose()

    def _turn(self, raw: dict, command: str | None) -> Turn:
        text = clean_output(raw["text"])
        done, won = raw["done"], raw["won"]
        if done is None:  # not known to jericho: read the end of the game from the text
            done = looks_like_game_over(text) or bool(raw["halted"])
            won = bool(done and self.max_score is not None and (raw["score"] or 0) >= self.max_score)
        number = self._turns[-1].number + 1 if self._turns else 0
        return Turn(
            number=number,
            command=command,
            text=text,
            score=raw["score"],
            moves=raw["moves"],
            location=raw["location"],
            done=bool(done),
            won=bool(won),
        )

    def _push(self, turn: Turn) -> None:
        self._turns.append(turn)
        self._states.append(None)
        self._journal.turn(turn)
        self._set_state_from(turn)

    def _set_state_from(self, turn: Turn) -> None:
        self.state = GameSessionState.OVER if turn.done else GameSessionState.PLAYING
