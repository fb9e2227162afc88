"""What a dialogue tells its watcher (the CLI's live view), as it happens, and the report at the end."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class DialogueState(Enum):
    RUNNING = "running"
    CONSENSUS = "consensus"  # ended early: an agent agreed
    FINISHED = "finished"  # every round was had
    FAILED = "failed"  # a turn could not finish: resumable


@dataclass(frozen=True)
class Step:
    """One turn of the dialogue: an agent's entry, the scribe's summary of a round, or the synthesis."""

    kind: str  # "agent", "summary", "synthesis"
    round: int
    role: str

    @property
    def key(self) -> str:
        return "synthesis" if self.kind == "synthesis" else f"{self.round}:{self.kind}:{self.role}"

    def describe(self) -> str:
        if self.kind == "agent":
            return f"round {self.round} · {self.role}"
        return f"round {self.round} · {self.role} (summary)" if self.kind == "summary" else f"{self.role} (synthesis)"


@dataclass(frozen=True)
class StepStarted:
    step: Step


@dataclass(frozen=True)
class ToolUsed:
    role: str
    line: str


@dataclass(frozen=True)
class ToolDenied:
    role: str
    tool: str
    file: str
    reason: str


@dataclass(frozen=True)
class FileRestored:
    step: Step
    file: str
    reason: str


@dataclass(frozen=True)
class StepFinished:
    step: Step
    seconds: float
    tools: int
    cost_usd: float


@dataclass(frozen=True)
class ConsensusReached:
    round: int
    role: str
    how: str  # "field", or "phrase: …"


@dataclass(frozen=True)
class Resumed:
    done: int  # steps finished before
    rewound: str | None  # the step cut off, run again from its checkpoint


DialogueEvent = StepStarted | ToolUsed | ToolDenied | FileRestored | StepFinished | ConsensusReached | Resumed


@dataclass(frozen=True)
class RoleStats:
    role: str
    agent: str
    turns: int
    tools: int
    denied: int
    seconds: float
    cost_usd: float


@dataclass(frozen=True)
class Report:
    state: DialogueState
    rounds: int  # rounds reached
    roles: tuple[RoleStats, ...]
    consensus_round: int | None
    consensus_role: str | None
    consensus_how: str | None
    restores: int
    entries: int
