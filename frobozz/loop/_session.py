"""A claude session with memory around every turn: the engine's pool (primary and sidecar) plus the
loop's parts. Before a user message: the orientation when a context window begins (at start and
after each compaction), recalled memories, the nudge of facts waiting to be stored. During the
turn: the archive observer. After it: suggestions, in the background; and at start, the capsules
of earlier conversation brought up to date.

Each of these waits on the database within a bound. When one runs out (or fails) and the database
does not answer a probe either (a database that hangs: each bound waited out in turn made every turn
14 s), memory is off (`MemoryService.going_without`, said once): the parts are left out at once, and
the turns go at claude's speed, until a probe in the background finds the database answering again. The
background work (suggestions, capsules) takes each of its steps on the database through the same guard, within
BACKGROUND_WAIT: one left out ends that work, so a database that hangs holds neither it nor the session's end."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup
from opentelemetry.context import Context

from .. import _spans
from .._plugin_off import plugin_off
from ..engine import (
    AssistantMessage,
    CompactBoundary,
    EngineOptions,
    EnginePool,
    EngineSettings,
    Event,
    Observer,
    Producer,
    Result,
    Sidecar,
    WarmSpare,
)
from ..memory import HandoffStore, LoopSessionStore, MemoryService, MemoryStore, Recall, quietly
from ._archive import ArchiveObserver
from ._capsules import refresh_capsules
from ._orientation import Provider, Window, capsules, here_and_now, latest_letter, memories, orientation
from ._recalled_blocks import recalled_blocks
from ._steps import bounded_steps
from ._suggest import Suggester, nudge_blocks

log = logging.getLogger("frobozz.loop")
T = TypeVar("T")
SETTLE = 10.0  # seconds a closing session waits for its background suggestions
ARCHIVE_WAIT = 10.0  # seconds the user's words may take to be archived before the turn goes without
BACKGROUND_WAIT = 3.0  # seconds a step of background work (suggestions, capsules) may take on the database
SIDECARS = 2  # warm sidecar engines: recall's question and the last turn's suggestions each find one
Providers = Callable[[MemoryStore, LoopSessionStore, HandoffStore], Sequence[Provider]]


def default_providers(client: str) -> Providers:
    def make(store: MemoryStore, sessions: LoopSessionStore, handoffs: HandoffStore) -> list[Provider]:
        return [here_and_now(client), latest_letter(handoffs), capsules(sessions), memories(store, sessions)]

    return make


class _Watcher:
    """Sees windows begin (compaction) and turns end (time to suggest)."""

    name = "memory loop"

    def __init__(self, loop: MemorySession) -> None:
        self.loop = loop
        self._said: list[str] = []

    def on_event(self, event: Event) -> None:
        if event.is_replay:
            return
        if isinstance(event, CompactBoundary):
            self.loop.needs_orientation = True
        elif isinstance(event, AssistantMessage) and not event.parent_tool_use_id and event.text.strip():
            self._said.append(event.text)
        elif isinstance(event, Result):
            said, self._said = "\n".join(self._said), []
            if not event.is_error and said:
                self.loop.after_turn(said)
            self.loop.turn_handled()


class MemorySession:
    """`async with MemorySession(options, memory, namespace="chat") as s: await s.send("hi")`, then read
    `s.events()`. `resume=` a loop session id takes up its claude session, archive and seen-set."""

    CLAUDES = 1 + SIDECARS  # claude processes a live one runs (recall asking): the primary and the warm sidecars

    @staticmethod
    def claude_options(options: EngineOptions) -> EngineOptions:
        """`options` as the loop starts a claude with them, its primary's or a sidecar's: the Frobozz Claude Code
        plugin's hooks off (`plugin_off`), for the loop is run here; with the plugin installed, they ran it a second
        time in that claude (a plugin daemon started, more sessions archived for each turn, the sidecar's questions
        among them). A claude started ahead for a session (a warm spare, a shared sidecar) is started with these."""
        return replace(options, env=plugin_off(options.env))

    @staticmethod
    def sidecars(recall_queries: bool) -> int:
        """Warm sidecar claudes a session needs: with recall asking no question, only the last turn's suggestions
        (and, in the background, the capsules' at the start) are asked, one at a time; a second warm claude would
        start for nothing (0.7 s of CPU, and its memory, in every routine firing)."""
        return SIDECARS if recall_queries else 1

    def __init__(
        self,
        options: EngineOptions,
        memory: MemoryService,
        *,
        namespace: str | None = None,
        client: str = "frobozz",
        resume: str | None = None,
        sidecar: EngineOptions | None = None,
        providers: Providers | None = None,
        recall: bool = True,
        suggest: bool = True,
        observers: Sequence[Observer] = (),
        producers: Sequence[Producer] = (),
        settings: EngineSettings | None = None,
        deadline: float = 1.5,
        spare: WarmSpare | None = None,
        shared_sidecar: Sidecar | None = None,
        recall_queries: bool = True,
    ) -> None:
        """`spare`: a new session's primary takes over its claude when it was started for `options`.
        `shared_sidecar`: warm sidecar claudes the caller keeps across sessions (then none start here).
        `recall_queries=False`: recall searches with the message alone, without first asking the sidecar for
        queries (a model turn): for a message that is its own best query (a mail), sent without that wait."""
        self.options, self.memory, self.namespace, self.client = self.claude_options(options), memory, namespace, client
        self.spare, self.shared_sidecar = spare, shared_sidecar
        self.sidecar_options = None if sidecar is None else self.claude_options(sidecar)
        self.resume, self.settings = resume, settings
        self.providers = providers or default_providers(client)
        self.use_recall, self.use_suggest, self.deadline = recall, suggest, deadline
        self.recall_queries = recall_queries
        self.extra_observers, self.extra_producers = list(observers), list(producers)
        self.needs_orientation = True
        self._windows = 0
        self._last_user = ""
        self._tg: TaskGroup | None = None
        self._background = 0
        self._settled = anyio.Event()
        self._settled.set()
        self._turn = Context()  # the trace context of the turn in hand
        self.turns_handled = 0  # turns (Results) the loop has seen end, its suggestions for them under way
        self._handled = anyio.Event()
        self._watching = False  # a probe in the background waits for the database to answer again

    async def __aenter__(self) -> MemorySession:
        store, self.sessions = await self.memory.store(), await self.memory.sessions()
        handoffs = await self.memory.handoffs()
        self.record = await self.sessions.open(self.namespace, client=self.client, session_id=self.resume)
        turns = await self.sessions.transcript(self.record.id)
        self.archive = ArchiveObserver(
            self.sessions, self.record.id, turn=max((e.turn for e in turns), default=0) + 1, guard=self._quietly
        )
        self.pool = EnginePool(
            self.options,
            self.sidecar_options,
            settings=self.settings,
            sidecars=self.sidecars(self.recall_queries and self.use_recall),
            spare=self.spare,
            shared_sidecar=self.shared_sidecar,
            resume=self.record.claude_session_id if self.resume else None,
            observers=[self.archive, _Watcher(self), *self.extra_observers],
            producers=self.extra_producers,
        )
        self._providers = list(self.providers(store, self.sessions, handoffs))
        self._recall = Recall(
            store, self.sessions, ask=self.pool.sidecar.ask if self.recall_queries else None, deadline=self.deadline
        )
        self._step = bounded_steps(self._quietly, within=BACKGROUND_WAIT)
        self._suggest = Suggester(self.sessions, self.pool.sidecar.ask, step=self._step)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._warm, store)  # the embedding model loads while claude starts
        try:
            await self.pool.__aenter__()
        except BaseException:
            await self._tg.__aexit__(None, None, None)
            raise
        refreshing = refresh_capsules(
            self.sessions, self.record.namespace, self.record.id, self.pool.sidecar.ask, step=self._step
        )
        self._in_background(refreshing)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.memory.answering:  # (with memory off, what is under way waits on a database that does not answer)
            with anyio.move_on_after(SETTLE):  # the last turn's suggestions, while the sidecar is still there
                await self.settled()
        try:
            await self.pool.__aexit__(*exc)
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)

    async def _warm(self, store: MemoryStore) -> None:
        try:
            await store.embedder.embed(["warming up"])
        except Exception as e:  # noqa: BLE001 - recall and orientation report it on their own
            log.warning("the embedding model did not load: %s", e)

    @property
    def id(self) -> str:
        return self.record.id

    async def message(self, text: str) -> list[dict[str, Any]]:
        """The content of the next user message: orientation (if a window begins), recall, nudge, text.
        Memory is help, never a gate: a part that fails or is slow (the database away) is left out with
        a log line, and the user's text always goes."""
        blocks: list[dict[str, Any]] = []
        self._turn = self.pool.primary.engine.trace.prepare_turn()  # this work is in the turn's trace
        where = {_spans.MEMORY_NAMESPACE: self.record.namespace}
        if self.needs_orientation:  # a new session has no window before this one; a resumed one has
            with _spans.span(_spans.ORIENTATION, parent=self._turn, attributes=where) as span:
                previous = self.record.window_started_at if self._windows or self.resume else None
                await self._quietly("the new window's record", self._new_window(), None)
                window = Window(
                    self.record.namespace,
                    self.record.id,
                    previous_start=previous,
                    topic=text,
                    database=self.memory_on(),
                )
                oriented = await orientation(self._providers, window, deadline=self.deadline)
                span.set_attribute(_spans.ORIENTATION_CHARS, len(oriented or ""))
            if oriented:
                blocks.append({"type": "text", "text": oriented})
            self.needs_orientation = False
        # the nudge (one short query) before recall, though shown after it: a database that hangs is found by a
        # bound of its own, and recall, which keeps its deadline without a word, is not waited out first
        nudge = await self._quietly("the nudge", nudge_blocks(self.sessions, self.record.id), [])
        if self.use_recall:
            with _spans.span(_spans.RECALL, parent=self._turn, attributes=where) as span:
                hits = await self._quietly("recall", self._recall(self.record.id, self.record.namespace, text), [])
                span.set_attributes(
                    {
                        _spans.MEMORY_FOUND: len(hits),
                        _spans.MEMORY_IDS: [h.memory.id for h in hits],
                        _spans.MEMORY_SCORES: [round(h.score, 4) for h in hits],
                    }
                )
            blocks += recalled_blocks(hits)
        return [*blocks, *nudge, *([{"type": "text", "text": text}] if text.strip() else [])]  # (none: images alone)

    async def _new_window(self) -> None:
        started = await self.sessions.new_window(self.record.id)
        self.record, self._windows = replace(self.record, window_started_at=started), self._windows + 1

    async def _quietly(self, part: str, work: Awaitable[T], default: T, *, within: float | None = None) -> T:
        """Memory's `quietly` on this session's service (see the module): `within` defaults to a little more than
        recall's own deadline, only a backstop. While memory is off, `default` at once, without a probe of its
        own: one in the background waits for the database, and no turn waits on it."""
        if not self.memory_on():
            if inspect.iscoroutine(work):
                work.close()  # (never started: nothing to wait for, and no "never awaited" warning)
            return default
        within = self.deadline + 0.5 if within is None else within
        result = await quietly(part, work, default, within=within, service=self.memory)
        self.memory_on()  # turned off by this part: the probe in the background starts
        return result

    def memory_on(self) -> bool:
        """Whether the database answers (as last found); while it does not, a probe waits for it in the background."""
        if self.memory.answering:
            return True
        self._watch()
        return False

    def _watch(self) -> None:
        if not self._watching and self._tg is not None:
            self._watching = True
            self._tg.start_soon(self._until_answering)

    async def _until_answering(self) -> None:
        try:
            await self.memory.until_answering()
        finally:
            self._watching = False

    async def send(self, text: str, images: Sequence[Mapping[str, Any]] = ()) -> None:
        """Archive the user's words (and a line for each image they carry: its type and size), then send them
        with what memory adds, the images after the text."""
        content = await self.message(text)
        seen = [_image_note(image) for image in images]
        archived = "\n".join(
            [*([text] if text else []), *(f"[image: {n['media_type']}, {n['bytes']} bytes]" for n in seen)]
        )
        with _spans.span(_spans.ARCHIVE, parent=self._turn):
            await self._quietly(
                "archiving the user's words",
                self.archive.archive_user(archived, data={"images": seen} if seen else None),
                None,
                within=ARCHIVE_WAIT,
            )
        self._last_user = text
        await self.pool.primary.send([*content, *map(dict, images)] if images else content)

    def events(self) -> AsyncIterator[Event]:
        return self.pool.primary.events()

    def turn_handled(self) -> None:
        self.turns_handled += 1
        self._handled.set()
        self._handled = anyio.Event()

    async def handled(self, turns: int) -> None:
        """Wait until the loop has seen `turns` turns end (and started their suggestions): the loop's observer
        sees a Result on a task of its own, so a consumer that closes the session as soon as it reads the
        Result waits here first, or the last turn's suggestions may never start."""
        while self.turns_handled < turns:
            await self._handled.wait()

    def after_turn(self, said: str) -> None:
        """Fire-and-forget: suggestions from the exchange just ended."""
        if self.use_suggest and self._tg is not None and self.memory_on():
            self._in_background(self._suggested(said, self._turn))

    async def _suggested(self, said: str, turn: Context) -> None:
        with _spans.span(_spans.SUGGEST, parent=turn):  # in the trace of the turn it comes from
            await self._suggest(self.record.id, self._last_user, said, namespace=self.record.namespace)

    def _in_background(self, work: Awaitable[object]) -> None:
        """Counted at once, not when its task first runs: `settled()` asked right after (once `handled(n)`
        returned) must wait for it."""
        assert self._tg is not None
        self._background += 1
        self._settled = anyio.Event() if self._settled.is_set() else self._settled
        self._tg.start_soon(self._background_work, work)

    async def _background_work(self, work: Awaitable[object]) -> None:
        try:
            await work
        except Exception as e:  # noqa: BLE001 - background work never stops the conversation
            log.warning("memory loop: background work failed (%s: %s)", type(e).__name__, e)
        finally:
            self._background -= 1
            if not self._background:
                self._settled.set()

    async def settled(self) -> None:
        """Wait until the background work so far (capsules, suggestions) is done."""
        await self._settled.wait()


def _image_note(image: Mapping[str, Any]) -> dict[str, Any]:
    """What the archive keeps of an image content block: its media type and decoded size, not its bytes."""
    source = image.get("source") or {}
    data = str(source.get("data") or "")
    return {"media_type": str(source.get("media_type") or "image"), "bytes": len(data) * 3 // 4 - data.count("=")}
