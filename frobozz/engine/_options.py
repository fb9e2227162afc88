"""How to start claude: every option the CLI takes for a stream-json session, as one frozen value."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from ._control import PermissionCallback
from ._hooks import Hooks
from ._mirror import FlushMode
from ._session_store import SessionStore
from .exceptions import CLINotFoundError

_SKILL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
# claude's model names and aliases: claude-sonnet-4-5, sonnet, opus[1m], Bedrock's ids and ARNs, Vertex's name@date
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}")


class Thinking(TypedDict, total=False):
    """claude's extended thinking: adaptive, on with a token budget, or off."""

    type: Literal["adaptive", "enabled", "disabled"]
    budget_tokens: int  # with "enabled"


@dataclass(frozen=True)
class EngineOptions:
    cli_path: str | Path | None = None
    model: str | None = None
    mcp_config: str | Path | Mapping[str, Any] | None = None  # a file, a JSON string, or a dict to send
    in_process_servers: Mapping[str, Any] = field(default_factory=dict)  # name -> an mcp MCPServer, served to
    #   claude over the control channel (no subprocess), or a function of no arguments that makes one at each
    #   claude start (a server's lifespan closes what it holds, its HTTP client or pool, when its session ends)
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
    trace_attributes: Mapping[str, Any] = field(default_factory=dict)  # on this engine's spans (kind, run id, …)
    # what users of the official Agent SDK expect, each a flag of the CLI (agents go with initialize)
    output_schema: Mapping[str, Any] | type[BaseModel] | None = None  # a JSON Schema, or a pydantic model class: the
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
    # sessions that outlive the machine: the transcript mirrored into a store, and resumed from it
    session_store: SessionStore | None = None
    session_store_flush: FlushMode = "batched"  # "batched": once a turn; "eager": after every frame
    session_project: str | None = None  # the project the store keeps the session under (default: claude's
    #   folder name for `cwd`, which differs between machines whose paths differ)
    session_store_timeout: float = 60.0  # seconds for each store call
    # the rest of the official SDK's options
    session_id: str | None = None  # the new session's id (a UUID), instead of one claude makes up
    resume_session_at: str | None = None  # with a resume: only the history up to this assistant message's uuid
    plugins: Sequence[str | Path] = ()  # plugin directories for this session
    sandbox: Mapping[str, Any] | None = None  # claude's sandbox settings ({"enabled": True, …}), sent as --settings
    skills: Literal["all"] | Sequence[str] | None = None  # the Skill tool for every skill, or for these; reads
    #   user and project settings (where skills live) unless `setting_sources` says otherwise
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    thinking: Thinking | None = None  # adaptive, enabled with a budget, or disabled (over max_thinking_tokens)
    task_budget: int | None = None  # tokens for the whole task
    include_hook_events: bool = False  # hook lifecycle events (started, progress, response) in the stream
    file_checkpointing: bool = False  # keep files' earlier states, for `Engine.rewind_files`
    # whose claude: run it as another account (a name or an id; only root may). Its supplementary groups are
    #   dropped; `env` should name a HOME that account owns (claude keeps its config and sign-in there)
    user: str | int | None = None
    group: str | int | None = None  # default: the user's primary group

    def json_schema(self) -> dict[str, Any] | None:
        """`output_schema` as a JSON Schema."""
        schema = self.output_schema
        if schema is None or isinstance(schema, Mapping):
            return None if schema is None else dict(schema)
        return schema.model_json_schema()  # a pydantic model class

    def server_commands(self) -> dict[str, str]:
        """Each stdio MCP server's command, from `mcp_config` (claude's own errors name it in some versions
        and not in others)."""
        config: Any = self.mcp_config
        try:
            if isinstance(config, Path) or (isinstance(config, str) and not config.lstrip().startswith("{")):
                config = json.loads(Path(config).read_text(encoding="utf-8"))
            elif isinstance(config, str):
                config = json.loads(config)
        except (OSError, ValueError):
            return {}
        servers = config.get("mcpServers") if isinstance(config, Mapping) else None
        return {
            str(name): str(server["command"])
            for name, server in (servers or {}).items()
            if isinstance(server, Mapping) and isinstance(server.get("command"), str)
        }

    def child_env(self) -> dict[str, str]:
        """What claude's environment gets from these options, beside `env`."""
        return {"CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING": "true"} if self.file_checkpointing else {}

    def _skill_tools(self) -> list[str]:
        if self.skills is None:
            return []
        if self.skills == "all":
            return ["Skill"]
        bad = [s for s in self.skills if not isinstance(s, str) or not _SKILL.fullmatch(s)]
        if bad:
            raise ValueError(f"not a skill name: {bad[0]!r:.80}")
        return [f"Skill({name})" for name in self.skills]

    def _thinking(self) -> list[str]:
        thinking = self.thinking
        if thinking is None:
            return [] if self.max_thinking_tokens is None else ["--max-thinking-tokens", str(self.max_thinking_tokens)]
        kind = thinking.get("type")
        if kind == "adaptive":
            return ["--thinking", "adaptive"]
        if kind == "disabled":
            return ["--thinking", "disabled"]
        if kind == "enabled" and isinstance(thinking.get("budget_tokens"), int):
            return ["--max-thinking-tokens", str(thinking["budget_tokens"])]
        raise ValueError(f"thinking is adaptive, disabled, or enabled with budget_tokens: {thinking!r:.120}")

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
            args += [
                "--mcp-config",
                json.dumps({"mcpServers": {name: {"type": "sdk", "name": name} for name in self.in_process_servers}}),
            ]
        if self.strict_mcp_config:
            args.append("--strict-mcp-config")
        if self.tools is not None:
            args += ["--tools", ",".join(self.tools)]
        allowed = [*self.allowed_tools, *self._skill_tools()]
        if allowed:
            args += ["--allowedTools", ",".join(allowed)]
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
        args += self._thinking()
        if self.effort:
            args += ["--effort", self.effort]
        if self.task_budget is not None:
            args += ["--task-budget", str(int(self.task_budget))]
        for directory in self.add_dirs:
            args += ["--add-dir", str(directory)]
        sources = self.setting_sources
        if sources is None and self.skills is not None:
            sources = ("user", "project")
        if sources is not None:
            args.append(f"--setting-sources={','.join(sources)}")
        for plugin in self.plugins:
            args += ["--plugin-dir", str(plugin)]
        if self.sandbox is not None:
            args += ["--settings", json.dumps({"sandbox": dict(self.sandbox)})]
        if self.include_hook_events:
            args.append("--include-hook-events")
        if self.file_checkpointing:
            args.append("--replay-user-messages")  # the user messages' uuids, which a rewind names
        if self.session_store is not None:
            args.append("--session-mirror")
        if resume:
            args.append(f"--resume={resume}")  # one token: a value can never pass for a flag
            if self.resume_session_at:
                args.append(f"--resume-session-at={self.resume_session_at}")
        elif self.continue_conversation:
            args.append("--continue")
        if self.session_id and not resume:
            args.append(f"--session-id={self.session_id}")
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
        "or `npm install -g @anthropic-ai/claude-code`, or set FROBOZZ_CLAUDE_PATH"
    )


def model_name_problem(model: str) -> str | None:
    """None when `model` can name claude's model (MODEL_NAME), else what is wrong with it, to be said."""
    if MODEL_NAME.fullmatch(model):
        return None
    return f"{model[:80]!r} is not a model's name (such as claude-sonnet-4-5, sonnet or opus[1m])"
