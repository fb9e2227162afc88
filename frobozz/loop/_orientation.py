"""Orientation: the first user message of every context window, assembled fresh from small async
providers, one section each. Every provider is optional and fault-tolerant: one that fails or runs
past its deadline is left out with a log line, and the window starts with the rest."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import anyio
import frontmatter

from ..memory import RECALL_MIN_SCORE, HandoffStore, LoopSessionStore, MemoryStore, memory_line

log = logging.getLogger("frobozz.loop")
MAX_FILE_CHARS = 20_000  # a context file autoloaded whole is cut here
MAX_FILES = 200


@dataclass(frozen=True)
class Window:
    """What providers know of the window being opened."""

    namespace: str
    session_id: str
    previous_start: datetime | None  # the last window's start: what is older was seen there
    topic: str = ""  # what the conversation is about, when known (the user's latest words)
    database: bool = True  # False: it does not answer (memory is off), and a provider that needs it has nothing


@dataclass(frozen=True)
class Section:
    title: str
    text: str


Provider = Callable[[Window], Awaitable[Section | None]]


async def orientation(providers: Sequence[Provider], window: Window, *, deadline: float = 2.0) -> str:
    """The sections of every provider that answered in time, in the providers' order, as Markdown."""
    sections: list[Section | None] = [None] * len(providers)

    async def one(index: int, provider: Provider) -> None:
        name = getattr(provider, "__name__", type(provider).__name__)
        with anyio.move_on_after(deadline) as scope:
            try:
                sections[index] = await provider(window)
            except Exception as e:  # noqa: BLE001 - a provider never blocks the window
                log.warning("orientation: %s failed and is left out (%s: %s)", name, type(e).__name__, e)
        if scope.cancelled_caught:
            log.warning("orientation: %s took more than %.1f s and is left out", name, deadline)

    async with anyio.create_task_group() as tg:
        for index, provider in enumerate(providers):
            tg.start_soon(one, index, provider)
    parts = [f"## {s.title}\n{s.text.strip()}" for s in sections if s is not None and s.text.strip()]
    return "# Orientation\n\n" + "\n\n".join(parts) if parts else ""


def context_files(*folders: Path) -> Provider:
    """Markdown files with front matter: `autoload: all` is included whole; `autoload: when` with
    `when: "<topics>"` is listed as a one-line hint the model can follow when the topic comes up."""

    async def provide(window: Window) -> Section | None:
        return await anyio.to_thread.run_sync(_read_context_files, folders)

    provide.__name__ = "context files"
    return provide


def _read_context_files(folders: Sequence[Path]) -> Section | None:
    whole, hints = [], []
    files = sorted(p for folder in folders if folder.is_dir() for p in folder.rglob("*.md"))[:MAX_FILES]
    for path in files:
        try:
            post = frontmatter.loads(path.read_text(encoding="utf-8", errors="replace"))
        except Exception as e:  # noqa: BLE001 - bad YAML in one file leaves the others
            log.warning("orientation: %s has front matter that cannot be read (%s)", path, e)
            continue
        autoload = str(post.metadata.get("autoload", "")).strip().lower()
        if autoload == "all":
            whole.append(f"### {path.name}\n{post.content[:MAX_FILE_CHARS]}")
        elif autoload == "when" and str(post.metadata.get("when", "")).strip():
            hints.append(f"- `{path}`: read it when these come up: {str(post.metadata['when']).strip()}")
    if not whole and not hints:
        return None
    text = "\n\n".join(whole)
    if hints:
        text += ("\n\n" if text else "") + "Files to read when their topic comes up:\n" + "\n".join(hints)
    return Section("Context", text)


def here_and_now(client: str) -> Provider:
    """Who is talking through what, where, and when (local time, weekday and time zone)."""

    async def provide(window: Window) -> Section:
        now = datetime.now().astimezone()
        return Section(
            "Here and now",
            f"Client: {client}. Host: {socket.gethostname()}. "
            f"Local time: {now:%A %d %B %Y, %H:%M} ({now.tzname()}, UTC{now:%z}).",
        )

    provide.__name__ = "here and now"
    return provide


def latest_letter(handoffs: HandoffStore) -> Provider:
    """The namespace's latest hand-off letter, if it was written since the last window began."""

    async def provide(window: Window) -> Section | None:
        if not window.database:
            return None
        letter = await handoffs.latest(window.namespace)
        if letter is None or (window.previous_start is not None and letter.created_at <= window.previous_start):
            return None
        lines = [letter.summary]
        if letter.next_steps:
            lines.append("Next steps:\n" + "\n".join(f"- {step}" for step in letter.next_steps))
        if letter.memories:
            lines.append("Remembered:\n" + "\n".join(f"- [memory {m.id}] {m.content}" for m in letter.memories))
        return Section(f"Hand-off letter ({letter.created_at:%Y-%m-%d %H:%M})", "\n".join(lines))

    provide.__name__ = "hand-off letter"
    return provide


def capsules(sessions: LoopSessionStore, periods: Sequence[str] = ("the last session", "earlier today")) -> Provider:
    """Short summaries of recent conversation, as the sidecar last wrote them."""

    async def provide(window: Window) -> Section | None:
        if not window.database:
            return None
        found = [c for c in [await sessions.capsule(window.namespace, p) for p in periods] if c is not None]
        return Section("Recently", "\n".join(f"- {c.period}: {c.summary}" for c in found)) if found else None

    provide.__name__ = "capsules"
    return provide


def memories(
    store: MemoryStore,
    seen: LoopSessionStore | None = None,
    *,
    recent: int = 5,
    relevant: int = 5,
    min_score: float = RECALL_MIN_SCORE,
) -> Provider:
    """The newest few memories, and the few most relevant to the window's topic; with `seen`, they join
    the session's seen-set, so recall does not show them again right after."""

    async def provide(window: Window) -> Section | None:
        if not window.database:
            return None
        newest = await store.recent(recent, window.namespace)
        best = (
            [
                h.memory
                for h in await store.search(
                    window.topic, limit=relevant, namespace=window.namespace, min_score=min_score
                )
            ]
            if newest and window.topic.strip()  # none in the namespace: no search (nor a model still loading)
            else []
        )
        shown = {m.id: m for m in [*best, *newest]}
        if not shown:
            return None
        if seen is not None:
            await seen.mark_seen(window.session_id, list(shown))
        return Section("Memories", "\n".join(memory_line(m) for m in shown.values()))

    provide.__name__ = "memories"
    return provide
