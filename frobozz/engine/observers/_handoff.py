"""Hand-off between context windows, driven from outside the model.

The relay watches the stream: when the model calls its `handoff` tool (any MCP server's tool of
that name), the relay waits for the turn to end, then sends `/compact` with the letter as the
compaction instructions, and makes the next window's first user message an orientation that
carries the letter. From the proxy's `Usage` events it also knows how full the context is (and
from claude's results how large the model's window is), and past a threshold it asks the model,
once per window, to hand off.

It is an observer (it watches) and a producer (it sends): pass the same object in both lists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from opentelemetry import context as otel_context

from ... import _spans
from .._events import AssistantMessage, CompactBoundary, Event, Result, ToolUseBlock, Usage, UserMessage

if TYPE_CHECKING:
    from .._session import Session

DEFAULT_WINDOW = 200_000  # tokens, until claude reports the model's own window


@dataclass(frozen=True)
class HandoffLetter:
    summary: str
    next_steps: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()

    @classmethod
    def from_input(cls, arguments: Mapping[str, Any]) -> HandoffLetter:
        def items(key: str) -> tuple[str, ...]:
            value = arguments.get(key) or ()
            return tuple(str(v) for v in value) if isinstance(value, list | tuple) else (str(value),)

        return cls(str(arguments.get("summary") or ""), items("next_steps"), items("memories"))

    def text(self) -> str:
        parts = [f"Summary: {self.summary}"]
        if self.next_steps:
            parts.append("Next steps:\n" + "\n".join(f"- {s}" for s in self.next_steps))
        if self.memories:
            parts.append("Remember:\n" + "\n".join(f"- {m}" for m in self.memories))
        return "\n\n".join(parts)


def compact_command(letter: HandoffLetter) -> str:
    return (
        "/compact Keep the hand-off letter below whole at the top of the summary; it is what the next "
        f"context window most needs.\n\n{letter.text()}"
    )


def orientation(letter: HandoffLetter) -> str:
    return (
        "A new context window begins. Your previous window handed its work to you with this letter "
        f"(latest_handoff has it too):\n\n{letter.text()}\n\nCarry on from the next steps."
    )


def ask_to_hand_off(used: int, window: int) -> str:
    """The message that asks the model to call the handoff tool, with how full its context window is."""
    return (
        f"Your context window is {100 * used // window}% full ({used:,} of {window:,} tokens). Call the handoff "
        "tool now with a summary of where things stand, the next steps, and anything worth remembering; "
        "the conversation will be compacted after this turn."
    )


@dataclass(frozen=True)
class HandoffStep:
    """What the relay decided as a turn ended: compact with this letter, or (no letter) ask for one."""

    letter: HandoffLetter | None = None
    used: int = 0
    window: int = DEFAULT_WINDOW


@contextmanager
def handoff_span(step: HandoffStep, parent: otel_context.Context | None) -> Iterator[_spans.Span]:
    """A step taken, as a span (its sizes, never the letter's text) under `parent`: the turn it begins (the
    compaction's, or the one the ask goes with)."""
    letter = step.letter
    attributes: dict[str, Any] = {
        _spans.HANDOFF_STEP: "ask" if letter is None else "compact",
        _spans.CONTEXT_TOKENS: step.used,
        _spans.HANDOFF_WINDOW: step.window,
    }
    if letter is not None:
        attributes |= {
            _spans.HANDOFF_NEXT_STEPS: len(letter.next_steps),
            _spans.HANDOFF_MEMORIES: len(letter.memories),
            _spans.HANDOFF_SUMMARY_CHARS: len(letter.summary),
        }
    with _spans.span(_spans.HANDOFF, parent=parent, attributes=attributes) as span:
        yield span


@dataclass
class HandoffRelay:
    tool: str = "handoff"
    threshold: float = 0.75  # of the context window, as the proxy measures it
    context_window: int | None = None  # None: the window claude reports for its model (200k until it does)
    compact: Callable[[HandoffLetter], str] = compact_command
    orient: Callable[[HandoffLetter], str] = orientation
    ask: Callable[[int, int], str] = ask_to_hand_off
    name: str = "handoff"
    letters: list[HandoffLetter] = field(default_factory=list)  # every letter relayed, in order

    def __post_init__(self) -> None:
        self._calls: dict[str, HandoffLetter] = {}  # tool-use id → the letter it carries
        self._letter: HandoffLetter | None = None  # written this turn, and the tool said yes
        self._context = 0
        self._asked = False
        self._window = self.context_window or DEFAULT_WINDOW
        self._out, self._in = anyio.create_memory_object_stream[HandoffStep](math.inf)

    @property
    def context_used(self) -> float:
        return self._context / self._window

    def is_handoff(self, name: str) -> bool:
        return name == self.tool or name.endswith(f"__{self.tool}")  # mcp__<server>__handoff

    # -- observer -------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        if event.is_replay:
            return
        if isinstance(event, AssistantMessage):
            for block in event.content:
                if isinstance(block, ToolUseBlock) and self.is_handoff(block.name):
                    self._calls[block.id] = HandoffLetter.from_input(block.input)
        elif isinstance(event, UserMessage):
            for block in event.content:
                letter = self._calls.pop(getattr(block, "tool_use_id", ""), None)
                if letter is not None and not getattr(block, "is_error", True):
                    self._letter = letter  # only a letter the server accepted is relayed
        elif isinstance(event, Usage) and event.status == 200 and not event.rewritten:
            self._context = max(self._context, event.context_tokens)  # side requests are smaller
        elif isinstance(event, CompactBoundary):
            self._asked, self._context = False, 0
        elif isinstance(event, Result):
            self._calls.clear()
            if self.context_window is None and event.context_window:
                self._window = event.context_window  # e.g. 1M for a model with the long context
            if self._letter is not None:
                letter, self._letter = self._letter, None
                self.letters.append(letter)
                self._out.send_nowait(HandoffStep(letter, self._context, self._window))
            elif not self._asked and self._context >= self.threshold * self._window:
                self._asked = True
                self._out.send_nowait(HandoffStep(None, self._context, self._window))

    def due(self) -> HandoffStep | None:
        """The ask, if it is due now (once per window): for a producer whose turns are many tool calls
        and that passes it on mid-turn, instead of waiting for the turn to end."""
        if self._asked or self._context < self.threshold * self._window:
            return None
        self._asked = True
        return HandoffStep(None, self._context, self._window)

    def messages(self, step: HandoffStep) -> tuple[str, ...]:
        """The messages a step sends: the compaction and the new window's orientation, or the ask."""
        if step.letter is not None:
            return self.compact(step.letter), self.orient(step.letter)
        return (self.ask(step.used, step.window),)

    def steps(self) -> list[HandoffStep]:
        """The steps decided and not yet taken, for a producer that takes them itself in its own order
        (the game runner, between a command and the next game message) instead of running the relay."""
        taken = []
        while True:
            try:
                taken.append(self._in.receive_nowait())
            except anyio.WouldBlock:
                return taken

    # -- producer -------------------------------------------------------------------------------
    async def run(self, session: Session) -> None:
        async for step in self._in:
            with handoff_span(step, session.engine.trace.prepare_turn()):
                for message in self.messages(step):  # queued together: the orientation is the new window's first
                    await session.send(message)
