"""The orchestrator: it owns the dialogue's structure. For each step it keeps a checkpoint, writes the
skeleton (an entry with round, role and timestamp; a summary heading; the synthesis outline), tells the
role's claude in one short instruction which files to read and which to edit (never what they hold),
validates the files after the turn (restoring a broken one from its last good copy, with a record), looks
for consensus, and writes the ledger. Each role keeps one claude session for the whole dialogue, resumed
by id when the dialogue is."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import anyio

from ..engine import Engine, EngineError, EngineOptions, Restarted, Result, Session, TurnCost, transcript_path
from ._consensus import consensus_of
from ._directory import DIALOGUE, NOT_WRITTEN, PENDING, QUESTION, SUMMARY, SYNTHESIS, DialogueDir, Ledger, RoleRecord
from ._entries import Entry, metadata_changes, parse, skeleton
from ._events import (
    ConsensusReached,
    DialogueEvent,
    DialogueState,
    FileRestored,
    Report,
    Resumed,
    RoleStats,
    Step,
    StepFinished,
    StepStarted,
    ToolDenied,
    ToolUsed,
)
from ._guard import Guard
from ._inputs import check_question
from ._roles import Role
from ._tool_log import RoleToolLog
from .exceptions import DialogueError, DialogueFileError, DialogueInputError, TurnError
from .settings import DialogueSettings

RULES = (
    "You take part in a written dialogue run by an orchestrator. Each turn it tells you which files to read "
    "and which one to edit. Use Read, then Edit; change only what the instruction names."
)


class Dialogue:
    """`await Dialogue.create(dir, question, roles, rounds=3, options=...).run()`, or `Dialogue.resume(dir, ...)`.
    `options` is the template of every role's claude (model, env); the dialogue sets the rest."""

    def __init__(
        self,
        directory: DialogueDir,
        ledger: Ledger,
        *,
        options: EngineOptions | None = None,
        settings: DialogueSettings | None = None,
        on_event: Callable[[DialogueEvent], None] | None = None,
    ) -> None:
        self.dir = directory
        self.ledger = ledger
        self.options = options or EngineOptions()
        self.settings = settings or DialogueSettings()
        self.on_event = on_event or (lambda event: None)
        self._lock: int | None = None  # the directory's lock, from create or resume until the run ends
        self._sessions: dict[str, tuple[Session, RoleToolLog, Guard]] = {}
        self._costs = TurnCost()  # each role's claude session: its running cost total, turned into turns' costs
        self.agents = [r for r in ledger.roles if not r.scribe]
        self.scribe = next((r for r in ledger.roles if r.scribe), None)

    # -- making one ---------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: Path,
        question: str,
        roles: tuple[Role, ...],
        *,
        rounds: int = 3,
        options: EngineOptions | None = None,
        settings: DialogueSettings | None = None,
        on_event: Callable[[DialogueEvent], None] | None = None,
        model: str | None = None,
    ) -> Dialogue:
        """A new dialogue in `path` (which must not hold one). `model` is recorded for a resume (default: the
        options' model)."""
        settings = settings or DialogueSettings()
        check_question(question, settings.max_question_bytes)
        if not 1 <= rounds <= 100:
            raise DialogueInputError(f"rounds must be between 1 and 100, not {rounds}")
        directory = DialogueDir(path)
        if directory.exists():
            raise DialogueInputError(
                f"{directory.path} already holds a dialogue (or its files): take it up with "
                "--resume, or choose another directory"
            )
        if directory.path.exists() and not directory.path.is_dir():
            raise DialogueInputError(f"{directory.path} is not a directory")
        try:
            taken = directory.path.is_dir() and any(directory.path.iterdir())
        except OSError as e:
            raise DialogueInputError(f"{directory.path} cannot be read: {e.strerror}") from None
        if taken:  # (its files would be the dialogue's, and a link to a system folder, /etc, written into as it is)
            raise DialogueInputError(
                f"{directory.path} holds other files: a dialogue goes in a new or an empty directory"
            )
        lock = directory.lock()
        ledger = directory.create(question, roles, rounds, model or (options.model if options else None))
        dialogue = cls(directory, ledger, options=options, settings=settings, on_event=on_event)
        dialogue._lock = lock
        return dialogue

    @staticmethod
    def model_of(path: Path) -> str | None:
        """The model a dialogue was started with (what its resume uses unless told otherwise)."""
        return DialogueDir(path).load().model

    @classmethod
    def resume(
        cls,
        path: Path,
        *,
        options: EngineOptions | None = None,
        settings: DialogueSettings | None = None,
        on_event: Callable[[DialogueEvent], None] | None = None,
    ) -> Dialogue:
        """A dialogue from its files. A `dialogue.json` that is not the orchestrator's record (broken, or an entry
        edited), a missing question, a summary that is not text, or a lost checkpoint is an error that changes
        nothing."""
        directory = DialogueDir(path)
        ledger = directory.load()
        lock = directory.lock()  # before any check: another run's step under way is not a broken file
        try:
            _check_resumable(directory, ledger)
            dialogue = cls(directory, ledger, options=options, settings=settings, on_event=on_event)
            rewound = directory.rewind(ledger)
            directory.sweep()  # a kill -9 halfway through a write leaves its temporary file
        except BaseException:
            os.close(lock)
            raise
        dialogue._lock = lock
        dialogue.on_event(Resumed(done=len(ledger.done), rewound=rewound))
        return dialogue

    # -- running ------------------------------------------------------------------------------------
    def plan(self) -> Iterator[Step]:
        """Every step a full dialogue has, in order."""
        for n in range(1, self.ledger.rounds + 1):
            for agent in self.agents:
                yield Step("agent", n, agent.name)
            if self.scribe is not None:
                yield Step("summary", n, self.scribe.name)
        if self.scribe is not None:
            yield Step("synthesis", self.ledger.rounds, self.scribe.name)

    def _wanted(self, step: Step) -> bool:
        if step.key in self.ledger.done:
            return False
        agreed = self.ledger.consensus
        if agreed is None:
            return True
        return step.kind == "synthesis" or (step.kind == "summary" and step.round <= agreed["round"])

    async def run(self) -> Report:
        """The dialogue's remaining steps, one after another; the report at the end. TurnError (after the
        ledger says so) when a turn cannot finish: the dialogue can be resumed. The directory is this run's
        until it returns (another process's resume is refused meanwhile)."""
        if self._lock is None:
            self._lock = self.dir.lock()
        try:
            return await self._run()
        finally:
            self.close()

    def close(self) -> None:
        """Let the directory go (run does, at its end): another process may take the dialogue up."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    async def _run(self) -> Report:
        if self.ledger.state in (DialogueState.CONSENSUS, DialogueState.FINISHED):
            return self.report()
        self.ledger.state = DialogueState.RUNNING
        async with AsyncExitStack() as stack:
            try:
                for step in self.plan():
                    if self._wanted(step):
                        await self._step(stack, step)
            except (DialogueError, EngineError) as e:
                self.ledger.state = DialogueState.FAILED
                self.dir.save(self.ledger)
                if isinstance(e, DialogueError):
                    raise
                raise TurnError(f"claude failed: {e}") from e
        self.ledger.state = DialogueState.CONSENSUS if self.ledger.consensus else DialogueState.FINISHED
        self.dir.save(self.ledger)
        return self.report()

    async def _step(self, stack: AsyncExitStack, step: Step) -> None:
        role = next(r for r in self.ledger.roles if r.name == step.role)
        self.dir.begin(self.ledger, step.key)
        target = self._skeleton(step)
        self.dir.keep_good()
        self.on_event(StepStarted(step))
        session, tools, guard = await self._session(stack, role)
        calls, denials, started = len(tools.calls), guard.denials, time.monotonic()
        cost = await self._turn(session, self._instruction(step, target))
        seconds = time.monotonic() - started
        self._validate(step, target)
        self.dir.keep_good()
        stats = self.ledger.stats.setdefault(role.agent, {})
        for name, value in (
            ("turns", 1),
            ("tools", len(tools.calls) - calls),
            ("denied", guard.denials - denials),
            ("seconds", seconds),
            ("cost_usd", cost),
        ):
            stats[name] = stats.get(name, 0) + value
        if step.kind == "agent":
            *earlier, last = self.dir.entries()
            how = consensus_of(last, self.settings.consensus_phrases)
            if how is not None and any(e.role != step.role for e in earlier):  # agreeing needs someone to agree with
                self.ledger.consensus = {"round": step.round, "role": step.role, "how": how}
        self.dir.finish(self.ledger, step.key)
        self.on_event(StepFinished(step, seconds, len(tools.calls) - calls, cost))
        if step.kind == "agent" and self.ledger.consensus is not None:
            self.on_event(ConsensusReached(step.round, step.role, self.ledger.consensus["how"]))

    def _skeleton(self, step: Step) -> str:
        """The orchestrator's part of the step, written before the turn; the file the role will edit."""
        if step.kind == "agent":
            self.dir.write_entries([*self.dir.entries(), skeleton(step.round, step.role)])
            return DIALOGUE
        if step.kind == "summary":
            self.dir.write(
                SUMMARY,
                (self.dir.read(SUMMARY) or "# Summary\n").rstrip("\n") + f"\n\n## Round {step.round}\n\n{PENDING}\n",
            )
            return SUMMARY
        agreed = self.ledger.consensus
        outcome = (
            f"consensus in round {agreed['round']}, signalled by {agreed['role']}"
            if agreed
            else f"no consensus after {self.ledger.rounds} rounds"
        )
        entries = self.dir.entries()
        self.dir.write(
            SYNTHESIS,
            f"# Consensus synthesis\n\n- Outcome: {outcome}\n- Entries: {len(entries)}\n"
            f"- Participants: {', '.join(a.name for a in self.agents)}\n\n"
            f"## Synthesis\n\n{PENDING}\n",
        )
        return SYNTHESIS

    def _instruction(self, step: Step, target: str) -> str:
        """One short instruction: which files to read, which to edit. Paths only (in backquotes: a path may hold
        spaces), never their content."""

        def p(name: str) -> str:
            return f"`{self.dir[name]}`"

        if step.kind == "agent":
            return (
                f"Round {step.round}, your turn as {step.role}. Read {p(QUESTION)}, {p(SUMMARY)} (if it exists) "
                f"and {p(DIALOGUE)}. Then Edit {p(DIALOGUE)}: fill the content field of its last entry with "
                "your contribution, and set its consensus field to true only if you agree with the other "
                "agents' position. Change nothing else."
            )
        if step.kind == "summary":
            return (
                f"Round {step.round} is over. Read {p(DIALOGUE)}, then Edit {p(SUMMARY)}: replace the line "
                f"{PENDING} under the heading 'Round {step.round}' with a short summary of that round."
            )
        return (
            f"The dialogue has ended. Read {p(DIALOGUE)} and {p(SUMMARY)}, then Edit {p(SYNTHESIS)}: "
            f"replace the line {PENDING} with the synthesis of the dialogue."
        )

    async def _session(self, stack: AsyncExitStack, role: RoleRecord) -> tuple[Session, RoleToolLog, Guard]:
        """The role's claude, started at its first step (resumed when it has a transcript already)."""
        if role.name in self._sessions:
            return self._sessions[role.name]
        tools = RoleToolLog(
            self.dir.path, self.dir.tool_log(role.agent), on_line=lambda line: self.on_event(ToolUsed(role.name, line))
        )

        def denied(tool_use_id: str | None, tool: str, file: str, reason: str) -> None:
            tools.denied(tool_use_id)
            self.on_event(ToolDenied(role.name, tool, file, reason))

        guard = Guard(self.dir.path, scribe=role.scribe, max_chars=self.settings.max_content_chars, on_deny=denied)
        options = replace(
            self.options,
            cwd=self.dir.path,
            tools=("Read", "Edit"),
            allowed_tools=(),
            permission_mode="acceptEdits",
            system_prompt=f"{role.prompt.strip()}\n\n{RULES}",
            append_system_prompt=None,
            setting_sources=(),
            hooks={"PreToolUse": [guard.matcher()]},
            max_turns=self.settings.max_turns,
            session_id=role.session_id,
            mcp_config=None,
            strict_mcp_config=True,
        )
        env = Engine(options).env  # where claude keeps this role's transcript depends on its environment
        resume = role.session_id if transcript_path(role.session_id, self.dir.path, env).is_file() else None
        session = await stack.enter_async_context(Session(options, observers=[tools], resume=resume))
        if resume is not None:  # claude carries on from the total it restores (not what the ledger says was spent)
            self._costs.resumed_by(session.engine)
        self._sessions[role.name] = (session, tools, guard)
        return self._sessions[role.name]

    async def _turn(self, session: Session, instruction: str) -> float:
        """Send the instruction and wait for the turn's end; its cost."""
        await session.send(instruction)
        with anyio.move_on_after(self.settings.turn_timeout) as deadline:
            async for event in session.events():
                if isinstance(event, Restarted) and event.resumed:  # claude crashed: it restored an older total
                    self._costs.resumed_by(session.engine)
                elif isinstance(event, Result) and not event.is_replay:
                    if event.is_error:  # (an API error is claude's "success" subtype: not said)
                        kind = "" if event.subtype == "success" else f" ({event.subtype})"
                        raise TurnError(f"the turn ended in error{kind}: {(event.result or '')[:300]}")
                    return self._costs.of(event) or 0.0
        if deadline.cancelled_caught:
            raise TurnError(
                f"the turn took longer than {self.settings.turn_timeout:g} s (FROBOZZ_DIALOGUE_TURN_TIMEOUT)"
            )
        raise TurnError("claude stopped before the turn ended")

    def _validate(self, step: Step, target: str) -> None:
        """After the turn: dialogue.json must be the last good copy but for the last entry's content and
        consensus; the scribe's file must be text. What is not is put back, with a record."""
        good, limit = parse(self.dir.good(DIALOGUE) or "[]"), self.settings.max_content_chars
        try:
            why = (
                metadata_changes(good, self.dir.entries(), limit)
                if step.kind == "agent"
                else (None if self.dir.entries() == good else "only agents edit dialogue.json")
            )
        except DialogueFileError as e:
            why = str(e)
        if why is not None:
            self._restored(step, DIALOGUE, why)
        if target != DIALOGUE:
            try:
                text = self.dir.read(target)
                why = (
                    "it is missing"
                    if text is None
                    else f"it is {len(text)} characters; the limit is {limit}"
                    if len(text) > limit
                    else None
                )
            except (DialogueFileError, OSError) as e:
                text, why = None, f"it cannot be read: {e}"
            if why is not None:
                self._restored(step, target, why)
                text = self.dir.read(target)
            if text is not None and PENDING in text:
                self.dir.write(target, text.replace(PENDING, NOT_WRITTEN))

    def _restored(self, step: Step, name: str, why: str) -> None:
        self.dir.restore(name, step.key, why)
        self.ledger.restores += 1
        self.on_event(FileRestored(step, name, why))

    # -- the end ------------------------------------------------------------------------------------
    def report(self) -> Report:
        entries = self.dir.entries()
        agreed = self.ledger.consensus or {}
        roles = tuple(
            RoleStats(
                role=r.name,
                agent=r.agent,
                turns=int(s.get("turns", 0)),
                tools=int(s.get("tools", 0)),
                denied=int(s.get("denied", 0)),
                seconds=s.get("seconds", 0.0),
                cost_usd=s.get("cost_usd", 0.0),
            )
            for r in self.ledger.roles
            for s in [self.ledger.stats.get(r.agent, {})]
        )
        return Report(
            state=self.ledger.state,
            rounds=max((e.round for e in entries), default=0),
            roles=roles,
            consensus_round=agreed.get("round"),
            consensus_role=agreed.get("role"),
            consensus_how=agreed.get("how"),
            restores=self.ledger.restores,
            entries=len(entries),
        )


def _recorded(text: str | None, where: Path) -> list[Entry]:
    """The entries in one of the orchestrator's own records (the good copy, a checkpoint)."""
    try:
        return parse(text or "[]")
    except ValueError as e:
        raise DialogueFileError(
            f"the orchestrator's record {where} is broken ({e}): this dialogue cannot be "
            "resumed as it was; start a new one"
        ) from e


def _check_resumable(directory: DialogueDir, ledger: Ledger) -> None:
    """DialogueFileError, changing nothing, unless dialogue.json is the orchestrator's record entry for entry, content
    too (or the checkpoint of the step cut off and that step's own entry, which the rewind takes away), the question
    is there, and the scribe's files are text (the summary there when it was). A finished entry edited by hand would
    otherwise be undone by the rewind, or read by the agents as what was said."""
    good = _recorded(directory.good(DIALOGUE), directory.private / "good" / DIALOGUE)
    before = None if ledger.current is None else directory.checkpoint(ledger.current).get(DIALOGUE)
    before_entries = None if before is None else _recorded(before, directory.checkpoint_path)
    name = DIALOGUE
    try:
        now = directory.entries()
        # a step cut off may have left its skeleton, filled or not (one entry more than its checkpoint)
        cut_off = (
            before_entries is not None
            and now[: len(before_entries)] == before_entries
            and len(now) - len(before_entries) <= 1
        )
        if now != good and not cut_off:
            raise DialogueFileError(
                f"{directory[DIALOGUE]} does not match the orchestrator's record: {_difference(good, now)}"
            )
        for name in (QUESTION, SUMMARY, SYNTHESIS):  # text, or DialogueFileError; the agents read them
            if directory.read(name) is None and (
                name == QUESTION or (name == SUMMARY and directory.good(name) is not None)
            ):
                raise DialogueFileError(f"{directory[name]} is missing")
    except DialogueFileError as e:
        copy = directory.private / "good" / name
        raise DialogueFileError(
            f"{e}. The last good copy is {copy}: put it back (or mend the file) and resume again"
            if copy.is_file()
            else f"{e}: put it back (or mend it) and resume again"
        ) from e


def _difference(good: list[Entry], now: list[Entry]) -> str:
    """The first entry that differs (an edit by hand shows there, whatever the count), else the count."""
    changed = next((n for n, pair in enumerate(zip(good, now, strict=False), start=1) if pair[0] != pair[1]), None)
    if changed is None:
        return f"it has {len(now)} entries, the record {len(good)}"
    n, old, new = changed, good[changed - 1], now[changed - 1]
    if (old.round, old.role, old.timestamp) != (new.round, new.role, new.timestamp):
        return (
            f"entry {n} is round {new.round}, {new.role}, {new.timestamp}; "
            f"the record says round {old.round}, {old.role}, {old.timestamp}"
        )
    field = "content" if old.content != new.content else "consensus"
    return f"entry {n}'s {field} is not what was written in its turn (a finished entry is not edited)"
