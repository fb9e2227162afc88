"""How to start claude: every option the CLI takes for a stream-json session, as one frozen value."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._control import PermissionCallback
from ._hooks import Hooks
from .exceptions import CLINotFoundError


@dataclass(frozen=True)
class EngineOptions:
    cli_path: str | Path | None = None
    model: str | None = None
    mcp_config: str | Path | Mapping[str, Any] | None = None  # a file, a JSON string, or a dict to send
    strict_mcp_config: bool = False
    tools: Sequence[str] | None = None  # the built-in tools claude may use; () for none at all
    allowed_tools: Sequence[str] = ()
    disallowed_tools: Sequence[str] = ()
    permission_mode: str | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    cwd: str | Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    extra_args: Sequence[str] = ()
    include_partial_messages: bool = False
    can_use_tool: PermissionCallback | None = None
    hooks: Hooks = field(default_factory=dict)  # event -> matchers (see _hooks), registered at initialize
    proxy: bool = True
    max_restarts: int = 3
    event_buffer: int = 10_000

    def arguments(self, *, resume: str | None = None) -> list[str]:
        args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        if self.include_partial_messages:
            args.append("--include-partial-messages")
        if self.model:
            args += ["--model", self.model]
        if self.mcp_config is not None:
            config = self.mcp_config
            args += ["--mcp-config", json.dumps(config) if isinstance(config, Mapping) else str(config)]
        if self.strict_mcp_config:
            args.append("--strict-mcp-config")
        if self.tools is not None:
            args += ["--tools", ",".join(self.tools)]
        if self.allowed_tools:
            args += ["--allowedTools", ",".join(self.allowed_tools)]
        if self.disallowed_tools:
            args += ["--disallowedTools", ",".join(self.disallowed_tools)]
        if self.permission_mode:
            args += ["--permission-mode", self.permission_mode]
        if self.can_use_tool is not None:
            args += ["--permission-prompt-tool", "stdio"]  # permission prompts come to us as control requests
        if self.system_prompt is not None:
            args += ["--system-prompt", self.system_prompt]
        if self.append_system_prompt is not None:
            args += ["--append-system-prompt", self.append_system_prompt]
        if resume:
            args += ["--resume", resume]
        return args + list(self.extra_args)


def find_claude(explicit: str | Path | None = None) -> str:
    """The claude to run: the one asked for, else the project's own (beside this Python), else PATH."""
    if explicit:
        path = Path(explicit)
        if path.is_file():
            return str(path)
        found = shutil.which(str(explicit))
        if found:
            return found
        raise CLINotFoundError(f"no claude executable at {explicit}")
    beside = Path(sys.prefix) / "bin" / "claude"
    if beside.is_file():
        return str(beside)
    found = shutil.which("claude")
    if found:
        return found
    raise CLINotFoundError(
        "the claude CLI is not installed: run the README's set-up (it installs claude into .venv), "
        "or `npm install -g @anthropic-ai/claude-code`, or set FROBOZZ_CLAUDE_PATH")
