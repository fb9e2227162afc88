"""The memory loop behind Claude Code's hooks, keyed on claude's own session id: the orientation when a
window opens (startup, clear, after a compaction), recall and the nudge before each prompt, the turn
archived and suggestions drawn after each answer, a hand-off letter before a compaction, capsules when
the session ends. What the hooks send (prompts, transcripts) is data: it is stored and searched, never
followed, and never logged."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..loop import (
    Suggester,
    Window,
    capsules,
    here_and_now,
    latest_letter,
    memories,
    nudge_blocks,
    orientation,
    recalled_blocks,
    refresh_capsules,
)
from ..memory import LoopSession, MemoryService, Recall, TranscriptStore, quietly
from ._redact import redact
from ._transcript import read_transcript, tool_steps
from .exceptions import PluginError

log = logging.getLogger("frobozz.plugin")
Ask = Callable[[str], Awaitable[str]]
CLIENT = "claude code"
TRANSCRIPT_CHARS = 12_000  # of the conversation's end read for the hand-off letter
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")
LETTER_PROMPT = (
    "The conversation below is about to be compacted. Write a hand-off letter for the same assistant, "
    "who will continue it with only the letter to go on: first one paragraph saying what was being done and "
    "where things stand, then the next steps, one per line, each starting with '- '. Only the letter.\n\n"
    "{conversation}"
)


class HookInput(BaseModel):
    """The fields of Claude Code's hook input the loop reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")

    session_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
    cwd: str = ""
    transcript_path: str = ""
    source: str = ""
    prompt: str = Field(default="", max_length=1_000_000)
    last_assistant_message: str | None = Field(default=None, max_length=1_000_000)
    reason: str = ""
    tool_name: str = ""


def project_namespace(cwd: str) -> str:
    """The project's name: the git root's folder, or the folder itself, made a valid namespace."""
    here = Path(cwd or ".").resolve()
    root = next((p for p in [here, *here.parents] if (p / ".git").exists()), here)
    return _UNSAFE.sub("-", root.name).strip("-.:")[:100] or "default"


def conversation_of(transcript: str, chars: int = TRANSCRIPT_CHARS) -> str:
    """The user's and the assistant's words from the end of claude's transcript (JSON lines)."""
    said: list[str] = []
    try:
        lines = Path(transcript).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if entry.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content")
        texts = (
            [content]
            if isinstance(content, str)
            else [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        )
        text = "\n".join(t for t in texts if t.strip())
        if text:
            said.append(f"{'User' if entry['type'] == 'user' else 'Assistant'}: {text}")
    return "\n".join(said)[-chars:]


class HookMemory:
    """One per daemon: `await hooks.handle(event, raw_input, namespace)` is the text to add (maybe empty)."""

    def __init__(self, service: MemoryService, *, ask: Ask | None = None, deadline: float = 1.5) -> None:
        self.service, self.ask, self.deadline = service, ask, deadline
        self._turns: dict[str, int] = {}
        self._open: dict[str, LoopSession] = {}  # claude's sessions adopted since the daemon started
        self._background: anyio.abc.TaskGroup | None = None
        self._transcripts: TranscriptStore | None = None

    def background(self, tg: anyio.abc.TaskGroup) -> None:
        """Where suggestions and capsules run, beside the hooks' answers."""
        self._background = tg

    async def handle(self, event: str, raw: Any, namespace: str | None = None) -> str:
        try:
            data = HookInput.model_validate(raw)
        except ValidationError as e:
            raise PluginError(f"the {event} hook's input was not understood ({e.error_count()} problems)") from e
        ns = namespace or project_namespace(data.cwd)
        handler = {
            "SessionStart": self.session_start,
            "UserPromptSubmit": self.prompt,
            "PostToolUse": self.post_tool_use,
            "Stop": self.stop,
            "PreCompact": self.pre_compact,
            "SessionEnd": self.session_end,
        }.get(event)
        if handler is None:
            raise PluginError(f"no such hook event: {event[:40]!r}")
        return await handler(data, ns)

    async def _adopt(self, data: HookInput, ns: str) -> LoopSession:
        """The loop's session for claude's, opened on its first hook (one round trip saved on every later one)."""
        if data.session_id not in self._open:
            sessions = await self.service.sessions()
            self._open[data.session_id] = await sessions.adopt(data.session_id, ns, client=CLIENT)
        return self._open[data.session_id]

    async def _turn(self, session_id: str) -> int:
        if session_id not in self._turns:
            sessions = await self.service.sessions()
            self._turns[session_id] = max((e.turn for e in await sessions.transcript(session_id)), default=0)
        return self._turns[session_id]

    async def session_start(self, data: HookInput, ns: str) -> str:
        """A resumed session keeps its window (its history is there); any other start opens one."""
        sessions = await self.service.sessions()
        record = await sessions.adopt(data.session_id, ns, client=CLIENT)
        self._open[record.id] = record
        if data.source == "resume":
            return ""
        previous = record.window_started_at if data.source == "compact" else None
        await sessions.new_window(record.id)
        store, handoffs = await self.service.store(), await self.service.handoffs()
        providers = [here_and_now(CLIENT), latest_letter(handoffs), capsules(sessions), memories(store, sessions)]
        return await orientation(
            providers, Window(record.namespace, record.id, previous_start=previous), deadline=self.deadline
        )

    async def prompt(self, data: HookInput, ns: str) -> str:
        """Recall for the prompt (its threshold and the session's seen-set) and the nudge; the prompt is archived.
        Each part on the database within a bound, through `quietly` on the service: a database that hangs is
        waited out by one prompt, and memory is off (said once) until it answers again (see MemoryService)."""
        store, sessions = await self.service.store(), await self.service.sessions()
        within = self.deadline + 0.5
        opened = await quietly(
            "the session's record", self._opened(data, ns), None, within=within, service=self.service
        )
        if opened is None:
            return ""
        record, turn = opened
        self._turns[record.id] = turn
        if data.prompt.strip():
            archiving = sessions.archive(record.id, turn, "user", redact(data.prompt))
            await quietly("archiving the prompt", archiving, None, within=within, service=self.service)
        recall = Recall(store, sessions, deadline=self.deadline)
        hits = await quietly(
            "recall", recall(record.id, record.namespace, data.prompt), [], within=within, service=self.service
        )
        blocks = recalled_blocks(hits)
        blocks += await quietly(
            "the nudge", nudge_blocks(sessions, record.id), [], within=self.deadline, service=self.service
        )
        return "\n\n".join(b["text"] for b in blocks)

    async def _opened(self, data: HookInput, ns: str) -> tuple[LoopSession, int]:
        """The loop's session for claude's and the number of this prompt's turn (no round trip once known)."""
        record = await self._adopt(data, ns)
        return record, await self._turn(record.id) + 1

    async def post_tool_use(self, data: HookInput, ns: str) -> str:
        """The model kept a memory through cortex: what waited to be kept is offered no more."""
        if data.tool_name.endswith("cortex__store"):
            await (await self.service.sessions()).clear_suggestions(data.session_id)
        return ""

    async def stop(self, data: HookInput, ns: str) -> str:
        """The answer archived; what is worth keeping is drawn from the exchange in the background and
        offered on the next prompt (never stored silently)."""
        sessions = await self.service.sessions()
        record = await self._adopt(data, ns)
        said = data.last_assistant_message or ""
        if said.strip():
            await sessions.archive(record.id, await self._turn(record.id) or 1, "assistant", redact(said))
        if said.strip() and self.ask is not None and self._background is not None:
            user = await self._last_user(record.id)
            suggest = Suggester(sessions, self.ask)
            self._background.start_soon(self._quietly_in_background, suggest(record.id, user, said))
        return ""

    async def _last_user(self, session_id: str) -> str:
        entries = await (await self.service.sessions()).transcript(session_id)
        return next((e.content for e in reversed(entries) if e.kind == "user"), "")

    async def pre_compact(self, data: HookInput, ns: str) -> str:
        """The hand-off letter, asked of the sidecar and kept before the window closes; the orientation
        after the compaction shows it."""
        if self.ask is None:
            raise PluginError("no model to write the hand-off letter with")
        conversation = conversation_of(data.transcript_path)
        if not conversation:
            return ""
        answer = (await self.ask(LETTER_PROMPT.format(conversation=conversation))).strip()
        lines = answer.splitlines()
        steps = [line.strip()[2:].strip() for line in lines if line.strip().startswith("- ")]
        summary = "\n".join(line for line in lines if not line.strip().startswith("- ")).strip() or answer
        if summary:
            await (await self.service.handoffs()).write(
                summary[:20_000], [s[:1000] for s in steps if s][:20], None, ns, data.session_id
            )
        return ""

    async def session_end(self, data: HookInput, ns: str) -> str:
        """The session's end archived with claude's whole transcript (redacted); the capsules of recent
        conversation brought up to date for the next."""
        sessions = await self.service.sessions()
        record = await self._adopt(data, ns)
        turn = await self._turn(record.id) or 1
        await sessions.archive(record.id, turn, "note", f"the session ended ({data.reason or 'no reason given'})")
        archiving = self.archive_transcript(record, data, turn)
        if self._background is None:
            await archiving
        else:  # a long transcript does not hold claude's exit up
            self._background.start_soon(self._quietly_in_background, archiving)
        self._turns.pop(record.id, None)
        self._open.pop(record.id, None)
        if self.ask is not None and self._background is not None:
            self._background.start_soon(
                self._quietly_in_background, refresh_capsules(sessions, record.namespace, record.id, self.ask)
            )
        return ""

    async def archive_transcript(self, record: LoopSession, data: HookInput, turn: int) -> None:
        """Every entry of claude's transcript (and its subagents') into the transcript store, each once however
        often the session ends (a resumed one ends again); its tool calls and results into the loop's archive,
        those not archived before."""
        transcript = await anyio.to_thread.run_sync(read_transcript, data.transcript_path, data.session_id)
        if transcript is None:
            return
        if self._transcripts is None:
            self._transcripts = await TranscriptStore.on((await self.service.store()).pool)
        key = {"project_key": transcript.project_key, "session_id": data.session_id}
        await self._transcripts.append(key, transcript.main)
        for subpath, entries in transcript.subagents.items():
            await self._transcripts.append({**key, "subpath": subpath}, entries)
        sessions = await self.service.sessions()
        kept = {
            (e.kind, e.data.get("id"))
            for e in await sessions.transcript(record.id)
            if e.kind in ("tool_use", "tool_result")
        }
        for kind, content, meta in tool_steps(transcript.main):
            if (kind, meta["id"]) not in kept:
                await sessions.archive(record.id, turn, kind, content, meta)

    async def _quietly_in_background(self, work: Awaitable[object]) -> None:
        try:
            await work
        except Exception as e:  # noqa: BLE001 - background work never stops the daemon
            log.warning("plugin: background work failed (%s)", type(e).__name__)
