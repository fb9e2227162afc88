"""Headless play: claude (or a scripted stand-in) plays a Z-machine game through the engine."""

from ._extract import extract_commands
from ._players import PlayerError, PlayerSpec, claude_readiness
from ._run import RunConfig, RunResult, play
from ._store import RunInfo, RunNotFoundError, RunStore, TurnRecord
from .settings import RunnerSettings

__all__ = ["PlayerError", "PlayerSpec", "RunConfig", "RunInfo", "RunNotFoundError", "RunResult", "RunStore",
           "RunnerSettings", "TurnRecord", "claude_readiness", "extract_commands", "play"]
