"""Embeddings of concurrent requests run as one batch: many clients storing and searching at once each
embed one text, and a text costs the model about two thirds as much in a batch of 8 or more as alone (4.5
against 6.7 ms of CPU at 25 tokens, one thread; the model cuts a batch into runs of like length, `_minilm`),
and one hand-off to the model's thread instead of many. Requests that arrive while the model runs wait and go
together as the next batch; and under such load (the last batch held more than one request) the first of a
batch also waits a short window (or until the batch is full) for others. A lone client never waits. The model
runs in a worker thread, so the event loop stays free. Each caller gets exactly its own vectors, as if it had
embedded alone (the model pads and masks a batch)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

Encode = Callable[[list[str]], list[list[float]]]


@dataclass
class _Request:
    texts: list[str]
    done: anyio.Event = field(default_factory=anyio.Event)
    vectors: list[list[float]] | None = None
    error: BaseException | None = None


@dataclass
class _Queue:
    """One event loop's pending requests (an embedder may serve several loops, one after another)."""

    waiting: list[_Request] = field(default_factory=list)
    texts: int = 0
    full: anyio.Event = field(default_factory=anyio.Event)
    model: anyio.Lock = field(default_factory=anyio.Lock)  # one batch on the model at a time
    last: int = 1  # requests in the last batch: more than one means concurrent clients


class Batcher:
    def __init__(self, encode: Encode, *, window: float = 0.004, max_texts: int = 64) -> None:
        self.encode, self.window, self.max_texts = encode, window, max_texts
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.window <= 0 or len(texts) >= self.max_texts:  # batching off, or a batch already
            return await anyio.to_thread.run_sync(self.encode, texts)
        queue = self._queues.setdefault(asyncio.get_running_loop(), _Queue())
        request = _Request(list(texts))
        queue.waiting.append(request)
        queue.texts += len(texts)
        if queue.texts >= self.max_texts:
            queue.full.set()
        if len(queue.waiting) == 1:  # the first of a batch leads it
            await self._lead(queue)
        else:
            await request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.vectors is not None
        return request.vectors

    async def _lead(self, queue: _Queue) -> None:
        with anyio.CancelScope(shield=True):  # the others wait on this batch: it runs even if the leader goes
            if queue.last > 1 or queue.model.locked():  # others are about: give them a moment to join
                with anyio.move_on_after(self.window):
                    await queue.full.wait()
            async with queue.model:  # the batch is taken only once the model is free: late comers join it
                batch, queue.waiting, queue.texts, queue.full = queue.waiting, [], 0, anyio.Event()
                queue.last = len(batch)
                try:
                    vectors = await anyio.to_thread.run_sync(self.encode, [t for r in batch for t in r.texts])
                except Exception as e:  # noqa: BLE001 - each caller gets the error, as if it had embedded alone
                    for r in batch:
                        r.error = e
                else:
                    start = 0
                    for r in batch:
                        r.vectors, start = vectors[start : start + len(r.texts)], start + len(r.texts)
                finally:
                    for r in batch:
                        r.done.set()
