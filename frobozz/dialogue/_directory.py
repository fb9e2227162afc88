"""The dialogue directory: what agents read and edit (`question.md`, `dialogue.json`, `summary.md`,
`consensus_synthesis.md`) and what only the orchestrator touches (`.dialogue/`: the set-up, the ledger of
finished steps, the last good copies, the restore records, each agent's tool log).

Every write is atomic. Before a step the orchestrator keeps a checkpoint of the agents' files; a step that
was cut off (a kill) is run again from it, so a finished step is never repeated and an unfinished one leaves
no trace."""

from __future__ import annotations

import fcntl
import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .._files import atomic_write
from ._entries import Entry, dump, parse
from ._events import DialogueState
from ._roles import Role
from .exceptions import DialogueFileError

PENDING = "_pending_"  # the line a scribe replaces; the orchestrator writes it into each skeleton
NOT_WRITTEN = "_(the scribe did not write this part)_"
QUESTION, DIALOGUE, SUMMARY, SYNTHESIS = "question.md", "dialogue.json", "summary.md", "consensus_synthesis.md"
SHARED = (DIALOGUE, SUMMARY, SYNTHESIS)  # what a step may change


class RoleRecord(BaseModel):
    """A participant as the ledger keeps it: all a resume needs to start its claude again."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    name: str
    prompt: str
    scribe: bool = False
    session_id: str  # the claude session of this role, made up front so a resumed dialogue finds it


class Ledger(BaseModel):
    """`.dialogue/state.json`: the set-up, and how far the dialogue got."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    rounds: int
    model: str | None = None
    roles: list[RoleRecord]
    done: list[str] = []  # the keys of finished steps, in order
    current: str | None = None  # the step under way, whose checkpoint is in .dialogue/checkpoint.json
    consensus: dict[str, Any] | None = None  # {round, role, how}
    state: DialogueState = DialogueState.RUNNING
    stats: dict[str, dict[str, float]] = {}  # agent -> turns, tools, denied, seconds, cost_usd (finished steps)
    restores: int = 0


class Checkpoint(BaseModel):
    """`.dialogue/checkpoint.json`: the agents' files before the step under way (only theirs: a rewind writes them)."""

    model_config = ConfigDict(extra="forbid")

    step: str
    files: dict[str, str | None]


class DialogueDir:
    """The directory's files by name, its ledger, the last good copies, checkpoints and the lock: the only code
    that touches the disk (the orchestrator decides, this writes, each write atomic)."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        self.private = self.path / ".dialogue"

    def __getitem__(self, name: str) -> Path:
        return self.path / name

    @property
    def ledger_path(self) -> Path:
        return self.private / "state.json"

    def exists(self) -> bool:
        """Whether the directory holds a dialogue, or files one would overwrite."""
        return self.private.exists() or any(self[name].exists() for name in (QUESTION, *SHARED))

    def lock(self) -> int:
        """Take the dialogue for this process: a descriptor holding `.dialogue/lock` until it is closed (or the
        process dies, even by kill -9), or DialogueFileError when another run holds it."""
        self.private.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.private / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(fd)
            raise DialogueFileError(f"{self.path} is being run by another process now: wait for it to end") from e
        return fd

    # -- creating and reading the set-up --------------------------------------------------------
    def create(self, question: str, roles: tuple[Role, ...], rounds: int, model: str | None) -> Ledger:
        ledger = Ledger(
            rounds=rounds,
            model=model,
            roles=[
                RoleRecord(agent=r.agent, name=r.name, prompt=r.prompt, scribe=r.scribe, session_id=str(uuid.uuid4()))
                for r in roles
            ],
        )
        self.private.mkdir(parents=True, exist_ok=True)
        self.write(QUESTION, question)
        self.write(DIALOGUE, dump([]))
        if any(r.scribe for r in roles):
            self.write(SUMMARY, "# Summary\n")
        self.keep_good()
        atomic_write(self.private / "good" / QUESTION, question.encode())  # what a resume names if it goes missing
        self.save(ledger)
        return ledger

    def load(self) -> Ledger:
        try:
            return Ledger.model_validate_json(self.ledger_path.read_bytes())
        except FileNotFoundError as e:
            raise DialogueFileError(f"{self.path} holds no dialogue to resume (no .dialogue/state.json)") from e
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the file"
            raise DialogueFileError(f"{self.ledger_path} is broken: {where}: {first['msg']}") from e
        except (OSError, ValueError) as e:
            raise DialogueFileError(f"{self.ledger_path} is broken: {str(e)[:300]}") from e

    def save(self, ledger: Ledger) -> None:
        atomic_write(self.ledger_path, ledger.model_dump_json(indent=2).encode())

    # -- the agents' files ------------------------------------------------------------------------
    def read(self, name: str) -> str | None:
        """The file's text (None: it does not exist), or DialogueFileError when it is not text."""
        try:
            return self[name].read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as e:
            raise DialogueFileError(f"{self[name]} is not UTF-8 text") from e

    def write(self, name: str, text: str) -> None:
        atomic_write(self[name], text.encode())

    def entries(self) -> list[Entry]:
        """dialogue.json's entries, or DialogueFileError saying what is wrong."""
        text = self.read(DIALOGUE)
        if text is None:
            raise DialogueFileError(f"{self[DIALOGUE]} is missing")
        try:
            return parse(text)
        except ValueError as e:
            raise DialogueFileError(f"{self[DIALOGUE]} is broken: {e}") from e

    def write_entries(self, entries: list[Entry]) -> None:
        self.write(DIALOGUE, dump(entries))

    def good(self, name: str) -> str | None:
        try:
            return (self.private / "good" / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def keep_good(self) -> None:
        """The agents' files as they are now become the last good copies."""
        for name in SHARED:
            text = self.read(name)
            if text is not None:
                atomic_write(self.private / "good" / name, text.encode())

    def restore(self, name: str, step: str, reason: str) -> None:
        """Put `name` back from its last good copy, with a record in `.dialogue/restores.jsonl`."""
        good = self.good(name)
        if good is None:
            self[name].unlink(missing_ok=True)
        else:
            self.write(name, good)
        with (self.private / "restores.jsonl").open("a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "at": datetime.now(UTC).isoformat(timespec="seconds"),
                        "file": name,
                        "step": step,
                        "reason": reason,
                    }
                )
                + "\n"
            )

    # -- steps: a checkpoint before, the ledger after ---------------------------------------------
    def begin(self, ledger: Ledger, step: str) -> None:
        files = {name: self.read(name) for name in SHARED}
        atomic_write(self.checkpoint_path, json.dumps({"step": step, "files": files}).encode())
        ledger.current = step
        self.save(ledger)

    @property
    def checkpoint_path(self) -> Path:
        return self.private / "checkpoint.json"

    def checkpoint(self, step: str) -> dict[str, str | None]:
        """The agents' files as they were before `step` began (None: the file did not exist), or DialogueFileError
        naming the checkpoint when it is lost, broken, or of another step: the step cannot be run again then."""
        try:
            checkpoint = Checkpoint.model_validate_json(self.checkpoint_path.read_bytes())
        except FileNotFoundError:
            why = "it is missing"
        except ValidationError as e:
            first = e.errors()[0]
            why = f"{'.'.join(str(p) for p in first['loc']) or 'the file'}: {first['msg']}"
        except (OSError, ValueError) as e:
            why = str(e)[:300]
        else:
            others = sorted(set(checkpoint.files) - set(SHARED))
            if checkpoint.step == step and not others:
                return checkpoint.files
            why = (
                f"it is of step {checkpoint.step[:80]!r}, not {step}"
                if checkpoint.step != step
                else f"it names {others[0][:80]!r}, not one of the agents' files"
            )
        raise DialogueFileError(
            f"the orchestrator's record {self.checkpoint_path} is broken ({why}): the step {step} that was cut off "
            "cannot be run again from it, so this dialogue cannot be resumed as it was; start a new one"
        )

    def rewind(self, ledger: Ledger) -> str | None:
        """A step cut off by a kill: its files put back as they were before it began (its key is returned)."""
        step = ledger.current
        if step is None:
            return None
        for name, text in self.checkpoint(step).items():
            if text is None:
                self[name].unlink(missing_ok=True)
            else:
                self.write(name, text)
        ledger.current = None
        self.keep_good()
        self.save(ledger)
        return step

    def sweep(self) -> list[Path]:
        """Take away what a writer killed halfway through an atomic write left: its temporary file beside the file
        it was writing (`.checkpoint.json.k3x9_q2a.tmp`), of the files this module writes, and no other (the
        dialogue's are whole: the rename had not happened). For a resume, which holds the lock: no writer of
        this dialogue is alive. The files taken away are returned."""
        gone = []
        for folder, names in (
            (self.path, (QUESTION, *SHARED)),
            (self.private, (self.ledger_path.name, self.checkpoint_path.name)),
            (self.private / "good", (QUESTION, *SHARED)),
        ):
            leftover = re.compile(rf"\.(?:{'|'.join(re.escape(n) for n in names)})\.[a-z0-9_]{{8}}\.tmp")
            try:
                found = [p for p in folder.iterdir() if leftover.fullmatch(p.name)]
            except FileNotFoundError:
                continue
            for path in found:
                if not path.is_symlink() and path.is_file():
                    path.unlink(missing_ok=True)
                    gone.append(path)
        return gone

    def finish(self, ledger: Ledger, step: str) -> None:
        ledger.done.append(step)
        ledger.current = None
        self.save(ledger)

    def tool_log(self, agent: str) -> Path:
        return self.private / f"tools-{agent}.log"
