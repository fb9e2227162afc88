"""Headless play: claude (or a scripted stand-in) plays a Z-machine game through the engine; runs queued
in Postgres for workers on many machines, with their results and a leaderboard."""

from ._everywhere import all_runs, damaged_runs, leaderboard, local_infos, run_row, with_damaged
from ._extract import extract_commands
from ._ledger import STATUSES, RunLedger
from ._live import LiveView, summary_table
from ._opening import ResumeError
from ._players import PlayerError, PlayerSpec, claude_readiness, commands_for
from ._prompts import load_template
from ._queue import Worker, enqueue, install_queue
from ._report import score_text
from ._run import RunConfig, RunResult, check_prompt_file, new_info, play
from ._session_parts import serve_in_process
from ._store import RunBusyError, RunDamagedError, RunFinishedError, RunInfo, RunNotFoundError, RunStore, TurnRecord
from .settings import RunnerSettings

__all__ = [
    "STATUSES",
    "LiveView",
    "PlayerError",
    "PlayerSpec",
    "ResumeError",
    "RunBusyError",
    "RunConfig",
    "RunDamagedError",
    "RunFinishedError",
    "RunInfo",
    "RunLedger",
    "RunNotFoundError",
    "RunResult",
    "RunStore",
    "RunnerSettings",
    "TurnRecord",
    "Worker",
    "all_runs",
    "check_prompt_file",
    "claude_readiness",
    "commands_for",
    "damaged_runs",
    "enqueue",
    "extract_commands",
    "install_queue",
    "leaderboard",
    "load_template",
    "local_infos",
    "new_info",
    "play",
    "run_row",
    "score_text",
    "serve_in_process",
    "summary_table",
    "with_damaged",
]
