"""How to start claude: every option the CLI takes for a stream-json session, as one frozen value."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
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
    in_process_servers: Mapping[str, Any] = field(default_factory=dict)  # name -> an mcp MCPServer, served to
    #   claude over the control channel (no subprocess)
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
    # what users of the official Agent SDK expect, each a flag of the CLI (agents go with initialize)
    output_schema: Mapping[str, Any] | type | None = None  # a JSON Schema, or a pydantic model class: the
    #   model answers in that shape, and the turn's Result carries it (an instance of the class) as `structured`
    max_turns: int | None = None  # per turn of the session: the agentic loop stops after this many model turns
    max_budget_usd: float | None = None  # claude stops spending past this many dollars
    continue_conversation: bool = False  # take up the latest session in `cwd`
    fork_session: bool = False  # with a resume or continue: go on under a new session id, the history copied
    add_dirs: Sequence[str | Path] = ()  # more directories the tools may reach
    setting_sources: Sequence[str] | None = None  # "user", "project", "local"; () for none at all
    agents: Mapping[str, Mapping[str, Any]] | None = None  # custom subagents: name -> {description, prompt, …}
    fallback_model: str | None = None  # when the model is overloaded
    max_thinking_tokens: int | None = None
    stderr: Callable[[str], None] | None = None  # each line claude writes to stderr, as it comes

    def json_schema(self) -> dict[str, Any] | None:
        """`output_schema` as a JSON Schema."""
        schema = self.output_schema
        if schema is None or isinstance(schema, Mapping):
            return None if schema is None else dict(schema)
        return schema.model_json_schema()  # a pydantic model class

    def arguments(self, *, resume: str | None = None) -> list[str]:
        args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        if self.include_partial_messages:
            args.append("--include-partial-messages")
        if self.model:
            args += ["--model", self.model]
        if self.mcp_config is not None:
            config = self.mcp_config
            args += ["--mcp-config", json.dumps(config) if isinstance(config, Mapping) else str(config)]
        if self.in_process_servers:
            args += ["--mcp-config", json.dumps({"mcpServers": {name: {"type": "sdk", "name": name}
                                                                for name in self.in_process_servers}})]
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
        schema = self.json_schema()
        if schema is not None:
            args += ["--json-schema", json.dumps(schema)]
        if self.max_turns is not None:
            args += ["--max-turns", str(self.max_turns)]
        if self.max_budget_usd is not None:
            args += ["--max-budget-usd", str(self.max_budget_usd)]
        if self.fallback_model:
            args += ["--fallback-model", self.fallback_model]
        if self.max_thinking_tokens is not None:
            args += ["--max-thinking-tokens", str(self.max_thinking_tokens)]
        for directory in self.add_dirs:
            args += ["--add-dir", str(directory)]
        if self.setting_sources is not None:
            args.append(f"--setting-sources={','.join(self.setting_sources)}")
        if resume:
            args += ["--resume", resume]
        elif self.continue_conversation:
            args.append("--continue")
        if self.fork_session and (resume or self.continue_conversation):
            args.append("--fork-session")
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
