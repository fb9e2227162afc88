"""Headless play: claude (or a scripted stand-in) plays a Z-machine game through the engine; runs queued
in Postgres for workers on many machines, with their results and a leaderboard."""

from ._extract import extract_commands
from ._ledger import STATUSES, RunLedger
from ._players import PlayerError, PlayerSpec, claude_readiness
from ._prompts import load_template
from ._queue import Worker, enqueue, install
from ._run import RunConfig, RunResult, new_info, play
from ._store import RunInfo, RunNotFoundError, RunStore, TurnRecord
from .settings import RunnerSettings

__all__ = ["STATUSES", "PlayerError", "PlayerSpec", "RunConfig", "RunInfo", "RunLedger", "RunNotFoundError",
           "RunResult", "RunStore", "RunnerSettings", "TurnRecord", "Worker", "claude_readiness", "enqueue",
           "extract_commands", "install", "load_template", "new_info", "play"]
