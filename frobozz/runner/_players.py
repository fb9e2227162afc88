"""Who plays: `claude` (the real CLI and model), or `walkthrough` / `script:FILE`, where a scripted
model on 127.0.0.1 stands in for claude and answers each game message with the next command.
The scripted player goes through the very same CLI, producer and observer as claude does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from frobozz.engine import CLINotFoundError, find_claude, text_of
from frobozz.engine.scripted import Handler, MessagesRequest, Reply, Text, ToolUse
from frobozz.games import NOT_SENT, CommandError, StoryInfo, check_command, walkthrough_for

from ._prompts import PAUSED, turn_in

STYLES = ("tag", "prompt", "command", "prose")
SEVERAL = 8  # commands in one reply of the scripted player when the run takes several (--multi)


class PlayerError(Exception):
    """The player asked for cannot play here; the message says why and what to do."""


@dataclass(frozen=True)
class PlayerSpec:
    kind: Literal["claude", "walkthrough", "script"]
    script: Path | None = None

    @property
    def name(self) -> str:
        return f"script:{self.script}" if self.script else self.kind

    @classmethod
    def parse(cls, text: str) -> PlayerSpec:
        if text == "claude":
            return cls("claude")
        if text == "walkthrough":
            return cls("walkthrough")
        if text.startswith("script:") and text[7:]:
            return cls("script", Path(text[7:]))
        raise PlayerError(f"unknown player {text!r}: use claude, walkthrough, script:FILE, or auto")


def commands_for(spec: PlayerSpec, story: StoryInfo) -> list[str]:
    """The commands a walkthrough or script player plays for this story (PlayerError if it has none)."""
    if spec.kind == "walkthrough":
        steps = walkthrough_for(story.md5)
        if not steps:
            raise PlayerError(f"{story.path.name} has no known walkthrough: use --player script:FILE")
        return steps
    assert spec.script is not None
    return script_commands(spec.script)


def script_commands(script: Path) -> list[str]:
    """A script's commands, one a line (# starts a comment); PlayerError naming the first line the game would
    not take (such a line was given again and again, never a turn, or with --multi the next one twice)."""
    try:
        lines = script.read_text(encoding="utf-8-sig").splitlines()  # (an editor's byte-order mark is no command)
    except OSError as e:
        raise PlayerError(f"cannot read the script {script}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise PlayerError(f"the script {script} is not UTF-8 text ({e.reason} at byte {e.start})") from e
    steps = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            command = check_command(line)
        except CommandError as e:
            raise PlayerError(f"the script {script}, line {number}: {e}") from e
        verb = command.lower().partition(" ")[0]
        if verb in NOT_SENT:
            raise PlayerError(
                f"the script {script}, line {number}: {verb!r} is not sent to the game; remove the line (a run ends "
                "by itself, when its script does)"
            )
        steps.append(command)
    if not steps:
        raise PlayerError(f"the script {script} has no commands (one per line; # starts a comment)")
    return steps


# One of these set (not empty, not only spaces) logs claude in by itself: `claude auth status` says `"loggedIn":
# true` for each
CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")


def claude_readiness(cli_path: str | None = None) -> str | None:
    """None when claude can play; else a plain sentence saying what is wrong and both fixes."""
    offline = "or play offline with --player walkthrough"
    try:
        claude = find_claude(cli_path)
    except CLINotFoundError as e:
        return f"{e}; {offline}."
    if any(os.environ.get(name, "").strip() for name in CREDENTIALS):
        return None  # claude signs in with it; asking `claude auth status` costs a claude start (~0.4 s) for the same
    # one of only spaces is none: claude's status counts it, but its run says "Not logged in"
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIALS}
    try:
        done = subprocess.run([claude, "auth", "status"], capture_output=True, text=True, timeout=30, env=env)
        status = json.loads(done.stdout or "{}")
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        return f"claude could not be asked whether it is logged in ({e}); {offline}."
    if not status.get("loggedIn"):
        return (
            "claude is installed but not logged in: run `claude` once and use /login "
            f"(or set ANTHROPIC_API_KEY), {offline}."
        )
    return None


# -- the scripted model ----------------------------------------------------------------------------
def _styled(command: str, style: str, n: int) -> str:
    if style == "tag":
        return f"The obvious move here is this.\n<command>{command}</command>"
    if style == "prompt":
        return f"Let me think about where this leads.\n\n> {command}"
    if style == "command":
        return f"Considering the room description carefully.\nCOMMAND: {command}"
    return f"I have a plan for turn {n}. Next I will do this:\n\n{command}"


def text_handler(commands: list[str], styles: tuple[str, ...] = STYLES, *, several: int = 1) -> Handler:
    """Answers the game message for turn N with commands[N], in a rotating reply style (with `several` > 1:
    commands[N:N+several], each in its tag); with memory, it writes a hand-off letter when asked (then gives
    the command), and answers the lessons question."""

    def handler(request: MessagesRequest) -> Reply | str:
        text = request.last_user_text()
        if is_compaction(request):
            return "Summary: the scripted player is following its walkthrough."
        if "lessons worth keeping" in text:
            return f"The scripted player knows {len(commands)} commands.\nIt follows them in order."
        n = turn_of(request)
        if n is None or n >= len(commands):
            return "I have no more commands to give."
        if HANDOFF_ASK in text and not request.tool_results():
            return Reply(
                (
                    ToolUse(
                        "mcp__handoff__handoff",
                        {
                            "summary": f"Following the walkthrough: {n} commands done.",
                            "next_steps": [f"next command: {commands[n]}"],
                        },
                    ),
                )
            )
        if several > 1:
            tags = "\n".join(f"<command>{c}</command>" for c in commands[n : n + several])
            return Reply((Text(f"The next moves, in order:\n{tags}"),))
        return Reply((Text(_styled(commands[n], styles[n % len(styles)], n)),))

    return handler


HANDOFF_ASK = "Call the handoff tool now"


def is_compaction(request: MessagesRequest) -> bool:
    """claude's own request for a summary of the conversation so far (a compaction, /compact or automatic)."""
    return "summary of the conversation" in request.last_user_text().lower()


def turn_of(request: MessagesRequest) -> int | None:
    """The turn of the latest game message (a tool's result may have come after it)."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            n = turn_in(text_of(message.get("content")))
            if n is not None:
                return n
    return None


_SLOT = re.compile(r"restore with slot '([^']+)'")
INTERRUPTED = "[Request interrupted by user"  # how claude marks a message whose tool calls an interrupt stopped


def tool_handler(commands: list[str], game: str, *, several: int = 1) -> Handler:
    """Plays through the game tools: new_game, then act with the next command (the turn the latest status
    line names, plus the acts answered since: a compacted window goes on where it was); with `several` > 1,
    that many acts in one message, which claude makes one after another. With memory, it writes a hand-off
    letter when a game answer asks, ends its turn when moves pause, and answers the lessons question."""

    def handler(request: MessagesRequest) -> Reply | str:
        if is_compaction(request):
            return "Summary: the scripted player is playing through the game tools."
        if "lessons worth keeping" in request.last_user_text():
            return f"The game tools take {len(commands)} commands of the walkthrough."
        results = request.tool_results()
        answered = " ".join(text_of(r.get("content")) for r in results)
        paused = [r for r in results if PAUSED in text_of(r.get("content"))]  # calls that were not made
        if paused and not request.last_user_text():
            return "Ending my turn, as asked."
        acts = _acts_done(request)
        if HANDOFF_ASK in answered:
            return Reply(
                (
                    ToolUse(
                        "mcp__handoff__handoff",
                        {
                            "summary": f"Playing through the game tools: {acts} commands done.",
                            "next_steps": [f"next command: {commands[min(acts, len(commands) - 1)]}"],
                        },
                    ),
                )
            )
        session = _latest_session(request)
        slot = _SLOT.search(request.last_user_text())
        if slot and len(paused) == len(results):  # told to pick the game up again after a stop
            return Reply((ToolUse("mcp__game__new_game", {"game": game}),))
        if session is None:
            return Reply((Text("Starting the game."), ToolUse("mcp__game__new_game", {"game": game})))
        uses = [
            b
            for m in request.messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_use"
        ]
        last_use = uses[-1]["name"] if uses else ""
        wanted = _SLOT.findall(" ".join(text_of(m.get("content")) for m in request.messages if m.get("role") == "user"))
        if wanted and last_use.endswith("__new_game"):
            return Reply((ToolUse("mcp__game__restore", {"session_id": session, "slot": wanted[-1]}),))
        if acts >= len(commands):
            return "That was the last command I had."
        acting = (ToolUse("mcp__game__act", {"session_id": session, "command": c}) for c in commands[acts:][:several])
        return Reply((Text(f"Move {acts + 1}."), *acting))

    return handler


def _acts_done(request: MessagesRequest) -> int:
    """The turn the latest status line names, plus the acts answered after it. Two refused acts were not
    played: one the run refused (paused), and one an interrupt stopped (under way when a full window is handed
    off: claude answers it with an error, and says so in the same message). Any other error the game gave
    counts: the player goes on to its next command."""
    names: dict[str, str] = {}
    done = 0
    for message in request.messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": text_of(content)}]
        if message.get("role") == "assistant":
            names.update({b["id"]: b.get("name", "") for b in blocks if b.get("type") == "tool_use"})
            continue
        stopped = any(str(b.get("text", "")).startswith(INTERRUPTED) for b in blocks if b.get("type") == "text")
        for block in blocks:  # in order: claude puts a message's text after the results it goes with
            if block.get("type") == "text" and (turn := turn_in(str(block.get("text", "")))) is not None:
                done = turn
            elif block.get("type") == "tool_result" and names.get(block.get("tool_use_id", ""), "").endswith("__act"):
                refused = block.get("is_error") and (stopped or PAUSED in text_of(block.get("content")))
                done += 0 if refused else 1
    return done


def _latest_session(request: MessagesRequest) -> str | None:
    """The game's session id: from the latest game answer, or (a new window) as the orientation names it."""
    for message in reversed(request.messages):
        content = message.get("content")
        for block in reversed(content if isinstance(content, list) else [{"type": "text", "text": content}]):
            text = text_of(block.get("content")) if block.get("type") == "tool_result" else str(block.get("text", ""))
            found = re.search(r'"session_id"\s*:\s*"([0-9a-f]+)"|session_id ([0-9a-f]{16})\b', text)
            if found:
                return found.group(1) or found.group(2)
    return None
