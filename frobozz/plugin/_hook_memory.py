"""The memory loop behind Claude Code's hooks, keyed on claude's own session id: the orientation when a
window opens (startup, clear, after a compaction), recall and the nudge before each prompt, the turn
archived and suggestions drawn after each answer, a hand-off letter before a compaction, capsules when
the session ends. What the hooks send (prompts, transcripts) is data: it is stored and searched, never
followed, and never logged.

Every step on the database, in a hook or in the background, goes through `quietly` on the daemon's service: a
database that hangs is waited out by one step (within its bound), memory is then off (said once), and until a
probe finds it answering no hook starts a step there (each is refused at once: the daemon says the database
cannot be reached) and no background work goes on.

A hook works only in the namespace it was given (the hub checks that one against the caller's token): when claude's
session id already names a loop session of another namespace, the hook is refused (memory is off for it, nothing is
read or written), so naming another's session reaches none of its memory. A transcript is read only from claude's
projects folder of the user the daemon (or the hub) runs as: a path elsewhere, which the hook's input names, is not
read (a log line says so)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ..engine import config_dir
from ..loop import (
    BackgroundStep,
    LeftOut,
    Suggester,
    Window,
    bounded_steps,
    capsules,
    here_and_now,
    latest_letter,
    memories,
    nudge_blocks,
    orientation,
    recalled_blocks,
    refresh_capsules,
)
from ..memory import (
    LoopSession,
    MemoryService,
    Recall,
    TranscriptStore,
    quietly,
    storable,
)
from ._redact import redact
from ._transcript import read_transcript, tool_steps
from .exceptions import PluginError

log = logging.getLogger("frobozz.plugin")
T = TypeVar("T")
Ask = Callable[[str], Awaitable[str]]
BACKGROUND_WAIT = 10.0  # seconds a step of background work (the transcript, suggestions, capsules) may take
CLIENT = "claude code"
TRANSCRIPT_CHARS = 12_000  # of the conversation's end read for the hand-off letter
# of a prompt or an answer the loop reads (its start): what the archive keeps of an entry (recall searches the
# first 10,000 of those, MAX_QUERY_CHARS); a longer one is cut, not refused (the hook takes inputs up to 8 MB)
MAX_TEXT = 200_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")
_LEADING = re.compile(r"^[^A-Za-z0-9]+")  # a namespace starts with a letter or a digit
LETTER_PROMPT = (
    "The conversation below is about to be compacted. Write a hand-off letter for the same assistant, "
    "who will continue it with only the letter to go on: first one paragraph saying what was being done and "
    "where things stand, then the next steps, one per line, each starting with '- '. Only the letter.\n\n"
    "{conversation}"
)


def _start(value: Any) -> Any:
    return storable(value[:MAX_TEXT]) if isinstance(value, str) else value


# a prompt's or an answer's first MAX_TEXT characters, cleaned (`storable`: a lone surrogate, an unpaired `\\ud800`
# escape in the hook's JSON, which Postgres cannot keep nor recall search for, made U+FFFD, and a NUL taken out)
Text = Annotated[str, BeforeValidator(_start)]


class HookInput(BaseModel):
    """The fields of Claude Code's hook input the loop reads; the rest is ignored. A long prompt or answer is cut
    to its first MAX_TEXT characters (the turn goes on: it is archived, and recall searches its start); a lone
    surrogate in one is made U+FFFD."""

    model_config = ConfigDict(extra="ignore")

    session_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
    cwd: str = ""
    transcript_path: str = ""
    source: str = ""
    prompt: Text = ""
    last_assistant_message: Text | None = None
    reason: Annotated[str, BeforeValidator(storable)] = ""
    tool_name: str = ""


def project_namespace(cwd: str) -> str:
    """The project's namespace: the name of the git root's folder (or of the folder itself, outside git), each run
    of characters other than ASCII letters, digits, '_', '.', ':' and '-' made one '-', what comes before its first
    letter or digit and '-', '.', ':' at its end taken off. A name that this changed in anything but its spaces made
    '-' (`My Project` → `My-Project`) has `-` and the first 10 hex digits of the SHA-256 of the folder's full path
    after it, within 100 characters (`_scratch` → `scratch-<hash>`, `café` → `caf-<hash>`, `проект-2` → `2-<hash>`), and
    a name left with nothing (`__`, `проект`, `项目`, the root folder) gives `project-<hash>`: a stable namespace of its
    own for each such folder, never one shared with another whose name differs only in what was dropped."""
    try:
        here = Path(cwd or ".").resolve()
    except ValueError:  # (a lone surrogate, which names no file)
        here = Path(cwd).absolute()
    root = next((p for p in [here, *here.parents] if (p / ".git").exists()), here)
    name = _LEADING.sub("", _UNSAFE.sub("-", root.name)).rstrip("-.:")
    if name == root.name.replace(" ", "-") and len(name) <= 100:
        return name  # (a valid name, or one with spaces: the namespace it always had)
    digest = hashlib.sha256(str(root).encode(errors="surrogatepass")).hexdigest()[:10]
    return f"{name[:89].rstrip('-.:')}-{digest}" if name else f"project-{digest}"


def claude_transcript(path: str) -> Path | None:
    """The transcript the hook's input names, resolved, if it is in claude's projects folder (`CLAUDE_CONFIG_DIR`, or
    ~/.claude, then `projects/`) of the user this process runs as; None for no path, and for one elsewhere (through
    a symlink or `..` too), which is not read: a hook's input (the hub's, from another machine) names any path."""
    if not path:
        return None
    try:
        projects = (config_dir() / "projects").resolve()
        found = Path(path).resolve()
    except (OSError, ValueError, RuntimeError):  # (a NUL, a lone surrogate, a symlink loop)
        found = None
    if found is None or found == projects or not found.is_relative_to(projects):
        log.warning("plugin: a transcript outside claude's projects folder was not read")
        return None
    return found


def conversation_of(transcript: str | Path, chars: int = TRANSCRIPT_CHARS) -> str:
    """The user's and the assistant's words from the end of claude's transcript (JSON lines); the caller has
    checked where it is (`claude_transcript`)."""
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


class _Elsewhere(PluginError):
    """Claude's session id names a loop session of another namespace than the hook's."""


def _ours(record: LoopSession, ns: str) -> LoopSession:
    """`record`, if it is in the hook's namespace; else _Elsewhere (naming neither the other namespace nor what is
    in it): the hook is refused, and nothing is read or written."""
    if record.namespace != ns:
        raise _Elsewhere(f"session {record.id!r} is kept in another namespace than {ns!r}: memory is off for it")
    return record


class HookMemory:
    """One per daemon: `await hooks.handle(event, raw_input, namespace)` is the text to add (maybe empty)."""

    def __init__(self, service: MemoryService, *, ask: Ask | None = None, deadline: float = 1.5) -> None:
        self.service, self.ask, self.deadline = service, ask, deadline
        self._turns: dict[str, int] = {}
        self._open: dict[str, LoopSession] = {}  # claude's sessions adopted since the daemon started
        self._background: anyio.abc.TaskGroup | None = None
        self._transcripts: TranscriptStore | None = None
        # a step of background work (the transcript, suggestions, capsules), through `quietly`: its result, or
        # LeftOut, which ends the work
        self._step: BackgroundStep = bounded_steps(self._quietly, within=BACKGROUND_WAIT)

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
        """The loop's session for claude's, opened on its first hook (one round trip saved on every later one);
        PluginError when it is another namespace's (`_ours`)."""
        if data.session_id not in self._open:
            sessions = await self.service.sessions()
            self._open[data.session_id] = await sessions.adopt(data.session_id, ns, client=CLIENT)
        return _ours(self._open[data.session_id], ns)

    async def _turn(self, session_id: str) -> int:
        if session_id not in self._turns:
            sessions = await self.service.sessions()
            self._turns[session_id] = max((e.turn for e in await sessions.transcript(session_id)), default=0)
        return self._turns[session_id]

    async def _quietly(self, part: str, work: Awaitable[T], default: T, *, within: float | None = None) -> T:
        """Memory's `quietly` on the daemon's service (see the module), within a little more than the deadline
        unless told: `work`'s result, or `default` (at once while memory is off, `work` not started)."""
        within = self.deadline + 0.5 if within is None else within
        return await quietly(part, work, default, within=within, service=self.service)

    async def session_start(self, data: HookInput, ns: str) -> str:
        """A resumed session keeps its window (its history is there); any other start opens one. Without the
        session's record (the database does not answer), the orientation has what needs no database."""
        store, sessions = await self.service.store(), await self.service.sessions()
        handoffs = await self.service.handoffs()
        adopting = sessions.adopt(data.session_id, ns, client=CLIENT)
        record = await self._quietly("the session's record", adopting, None)
        if record is not None:
            self._open[record.id] = record
            _ours(record, ns)
        if data.source == "resume":
            return ""
        previous = record.window_started_at if record is not None and data.source == "compact" else None
        if record is not None:
            await self._quietly("the new window", sessions.new_window(record.id), None)
        providers = [here_and_now(CLIENT), latest_letter(handoffs), capsules(sessions), memories(store, sessions)]
        window = Window(
            ns,
            data.session_id,
            previous_start=previous,
            database=record is not None and self.service.answering,
        )
        return await orientation(providers, window, deadline=self.deadline)

    async def prompt(self, data: HookInput, ns: str) -> str:
        """Recall for the prompt (its threshold and the session's seen-set) and the nudge; the prompt is archived.
        Each part on the database within a bound, through `quietly` on the service: a database that hangs is
        waited out by one prompt, and memory is off (said once) until it answers again (see MemoryService)."""
        store, sessions = await self.service.store(), await self.service.sessions()
        opened = await self._quietly("the session's record", self._opened(data, ns), None)
        if opened is None:
            return ""
        record, turn = opened[0], opened[1] + 1
        self._turns[record.id] = turn
        if data.prompt.strip():
            archiving = sessions.archive(record.id, turn, "user", redact(data.prompt))
            await self._quietly("archiving the prompt", archiving, None)
        recall = Recall(store, sessions, deadline=self.deadline)
        hits = await self._quietly("recall", recall(record.id, record.namespace, data.prompt), [])
        blocks = recalled_blocks(hits)
        blocks += await self._quietly("the nudge", nudge_blocks(sessions, record.id), [], within=self.deadline)
        return "\n\n".join(b["text"] for b in blocks)

    async def _opened(self, data: HookInput, ns: str) -> tuple[LoopSession, int]:
        """The loop's session for claude's and its last turn's number (no round trip once known)."""
        record = await self._adopt(data, ns)
        return record, await self._turn(record.id)

    async def post_tool_use(self, data: HookInput, ns: str) -> str:
        """The model kept a memory through cortex: what waited to be kept is offered no more."""
        if data.tool_name.endswith("cortex__store"):
            sessions = await self.service.sessions()
            record = await self._quietly("the session's record", self._adopt(data, ns), None)
            if record is not None:
                await self._quietly("clearing the suggestions", sessions.clear_suggestions(record.id), 0)
        return ""

    async def stop(self, data: HookInput, ns: str) -> str:
        """The answer archived; what is worth keeping is drawn from the exchange in the background and
        offered on the next prompt (never stored silently)."""
        sessions = await self.service.sessions()
        opened = await self._quietly("the session's record", self._opened(data, ns), None)
        said = data.last_assistant_message or ""
        if opened is None or not said.strip():
            return ""
        record, turn = opened
        await self._quietly(
            "archiving the answer", sessions.archive(record.id, turn or 1, "assistant", redact(said)), None
        )
        if self.ask is not None and self._background is not None and self.service.answering:
            user = await self._quietly("the last prompt", self._last_user(record.id), None)
            if user is not None:
                suggest = Suggester(sessions, self.ask, step=self._step)
                self._background.start_soon(self._quietly_in_background, suggest(record.id, user, said))
        return ""

    async def _last_user(self, session_id: str) -> str:
        entries = await (await self.service.sessions()).transcript(session_id)
        return next((e.content for e in reversed(entries) if e.kind == "user"), "")

    async def pre_compact(self, data: HookInput, ns: str) -> str:
        """The hand-off letter, asked of the sidecar and kept before the window closes; the orientation
        after the compaction shows it. (While memory is off, none is asked for: it could not be kept.)"""
        if self.ask is None:
            raise PluginError("no model to write the hand-off letter with")
        handoffs = await self.service.handoffs()
        if await self._quietly("the session's record", self._adopt(data, ns), None) is None:
            return ""  # (memory is off: the letter could not be kept)
        transcript = claude_transcript(data.transcript_path)
        conversation = "" if transcript is None else conversation_of(transcript)
        if not conversation:
            return ""
        answer = (await self.ask(LETTER_PROMPT.format(conversation=conversation))).strip()
        lines = answer.splitlines()
        steps = [line.strip()[2:].strip() for line in lines if line.strip().startswith("- ")]
        summary = "\n".join(line for line in lines if not line.strip().startswith("- ")).strip() or answer
        if summary:
            writing = handoffs.write(summary[:20_000], [s[:1000] for s in steps if s][:20], None, ns, data.session_id)
            await self._quietly("the hand-off letter", writing, None)
        return ""

    async def session_end(self, data: HookInput, ns: str) -> str:
        """The session's end archived with claude's whole transcript (redacted); the capsules of recent
        conversation brought up to date for the next. While memory is off, neither is started. (Refused, the
        session being another namespace's, what this daemon holds of it is kept.)"""
        ours = True
        try:
            sessions = await self.service.sessions()
            try:
                opened = await self._quietly("the session's record", self._opened(data, ns), None)
            except _Elsewhere:
                ours = False
                raise
            if opened is None:
                return ""
            record, turn = opened[0], opened[1] or 1
            ended = f"the session ended ({data.reason or 'no reason given'})"
            await self._quietly("archiving the session's end", sessions.archive(record.id, turn, "note", ended), None)
            if not self.service.answering:
                return ""
            archiving = self.archive_transcript(record, data, turn)
            if self._background is None:
                await archiving
            else:  # a long transcript does not hold claude's exit up
                self._background.start_soon(self._quietly_in_background, archiving)
            if self.ask is not None and self._background is not None:
                refreshing = refresh_capsules(sessions, record.namespace, record.id, self.ask, step=self._step)
                self._background.start_soon(self._quietly_in_background, refreshing)
            return ""
        finally:
            if ours:
                self._turns.pop(data.session_id, None)
                self._open.pop(data.session_id, None)

    async def archive_transcript(self, record: LoopSession, data: HookInput, turn: int) -> None:
        """Every entry of claude's transcript (and its subagents') into the transcript store, each once however
        often the session ends (a resumed one ends again); its tool calls and results into the loop's archive,
        those not archived before. Each step on the database a bounded one: one left out (memory off) ends it."""
        path = claude_transcript(data.transcript_path)
        transcript = (
            None if path is None else await anyio.to_thread.run_sync(read_transcript, str(path), data.session_id)
        )
        if transcript is None:
            return
        try:
            sessions = await self._step("the store", self.service.sessions())
            if self._transcripts is None:
                self._transcripts = await self._step("the transcript store", TranscriptStore.on(sessions.memories.pool))
            key = {"project_key": transcript.project_key, "session_id": data.session_id}
            await self._step("keeping the transcript", self._transcripts.append(key, transcript.main))
            for subpath, entries in transcript.subagents.items():
                keeping = self._transcripts.append({**key, "subpath": subpath}, entries)
                await self._step("keeping a subagent's transcript", keeping)
            kept = {
                (e.kind, e.data.get("id"))
                for e in await self._step("the archived tool steps", sessions.transcript(record.id))
                if e.kind in ("tool_use", "tool_result")
            }
            for kind, content, meta in tool_steps(transcript.main):
                if (kind, meta["id"]) not in kept:
                    await self._step("archiving a tool step", sessions.archive(record.id, turn, kind, content, meta))
        except LeftOut:
            return  # (`quietly` said why)

    async def _quietly_in_background(self, work: Awaitable[object]) -> None:
        try:
            await work
        except LeftOut:
            pass  # (`quietly` said why)
        except Exception as e:  # noqa: BLE001 - background work never stops the daemon
            log.warning("plugin: background work failed (%s)", type(e).__name__)
