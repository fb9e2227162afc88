"""Which claude is installed, and what of the engine it can carry: the versions the engine was tested with,
and each flag an option needs that this claude does not take. A version the suite was not run on is asked,
flag by flag, not judged by a table of version numbers: claude says "unknown option" at once, before it reads
any input. A tested version takes every flag (the suite passed on it), so it is not asked."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .._children import dying_with_parent

TESTED = ("2.1.197", "2.1.330")  # the whole suite passed on each; the set-up pins the last
# a flag the engine passes (with a harmless value) -> what needs it
FLAGS: dict[tuple[str, ...], str] = {
    ("--input-format", "stream-json"): "the engine itself (stream-json sessions)",
    ("--permission-prompt-tool", "stdio"): "can_use_tool (permission callbacks)",
    ("--include-partial-messages",): "include_partial_messages",
    ("--strict-mcp-config",): "strict_mcp_config",
    ("--json-schema", "{}"): "output_schema (structured output)",
    ("--max-budget-usd", "1"): "max_budget_usd",
    ("--fallback-model", "x"): "fallback_model",
    ("--setting-sources=user",): "setting_sources",
    ("--fork-session",): "fork_session",
    ("--session-id=00000000-0000-4000-8000-000000000000",): "session_id",
    ("--resume-session-at=x",): "resume_session_at",
    ("--plugin-dir", "."): "plugins",
    ("--settings", "{}"): "sandbox",
    ("--effort", "low"): "effort",
    ("--thinking", "adaptive"): "thinking",
    ("--task-budget", "1"): "task_budget",
    ("--include-hook-events",): "include_hook_events",
    ("--replay-user-messages",): "file_checkpointing (rewind_files)",
    ("--session-mirror",): "session_store (sessions that outlive the machine)",
}
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class CLIReport:
    path: str
    version: str | None  # None: `--version` said nothing we could read
    lacking: tuple[tuple[str, str], ...] = field(default=())  # (flag, what needs it)
    problem: str | None = None  # claude would not run at all

    @property
    def tested(self) -> bool:
        return self.version in TESTED

    def line(self) -> str:
        """One line for a person: what is installed, whether it was tested, and what it lacks."""
        if self.problem:
            return f"{self.path} cannot run: {self.problem}"
        found = f"claude {self.version or '(version unreadable)'} at {self.path}"
        tested = (
            "one of the versions the engine was tested with"
            if self.tested
            else f"not a version the engine was tested with ({', '.join(TESTED)})"
        )
        lacks = "; it lacks " + ", ".join(f"{flag} ({need})" for flag, need in self.lacking) if self.lacking else ""
        return f"{found}: {tested}{lacks}"


def _version(text: str) -> tuple[int, ...] | None:
    found = _VERSION.search(text)
    return tuple(int(n) for n in found.groups()) if found else None


def _accepts(claude: str, flag: Sequence[str], env: dict[str, str] | None, timeout: float) -> bool:
    """Whether claude takes `flag`: given no input, it either stops at once on an unknown option or
    exits quietly with nothing to do."""
    command = [claude, "-p", *flag, "--output-format", "stream-json", "--verbose"]
    if "--input-format" not in flag:
        command += ["--input-format", "stream-json"]
    try:
        done = subprocess.run(
            dying_with_parent(command),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )  # a doctor or test killed mid-probe leaves no claude behind
    except (OSError, subprocess.TimeoutExpired):
        return True  # no answer is no "unknown option": the doctor's other checks say what is wrong
    return "unknown option" not in (done.stderr + done.stdout)


def inspect_cli(claude: str, *, env: dict[str, str] | None = None, timeout: float = 30) -> CLIReport:
    """The installed claude's version, and every flag of FLAGS it refuses (asked in parallel: a claude process
    each, about 0.7 s of CPU, so only of a version not in TESTED)."""
    try:
        done = subprocess.run(
            dying_with_parent([claude, "--version"]), capture_output=True, text=True, timeout=timeout, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return CLIReport(path=claude, version=None, problem=str(e))
    if done.returncode != 0:
        return CLIReport(path=claude, version=None, problem=f"`--version` failed: {done.stderr.strip()[-300:]}")
    parsed = _version(done.stdout)
    version = ".".join(map(str, parsed)) if parsed else None
    if version in TESTED:  # the whole suite passed on it, every flag of FLAGS in use: nothing to ask
        return CLIReport(path=claude, version=version)
    with ThreadPoolExecutor(max_workers=8) as pool:
        accepted = list(pool.map(lambda flag: _accepts(claude, flag, env, timeout), FLAGS))
    lacking = tuple(
        (flag[0].split("=")[0], need) for (flag, need), ok in zip(FLAGS.items(), accepted, strict=True) if not ok
    )
    return CLIReport(path=claude, version=version, lacking=lacking)
