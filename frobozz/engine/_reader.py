"""The reader: one claude's stdout, line by line, to where each line belongs (control answers and requests to
its control channel, transcript frames to the session store's mirror, the rest to the event stream as typed
events), and what becomes of an event on its way out (the session's id taken, the trace told, a structured
answer typed, an API error said before its Result). When stdout ends, claude's exit is said and a crash handed
back to the engine, which restarts it.

Plain functions of an `Engine`, kept apart from its lifecycle: `Engine._spawn` starts `read` as one task per
claude it spawns, and they read and set the engine's own state (its current claude, its session id, its store's
mirror, whether it is closing) as its methods did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import orjson

from ._control import ControlChannel
from ._events import (
    AssistantMessage,
    CompactBoundary,
    ErrorEvent,
    Event,
    ProcessExit,
    Result,
    SystemInit,
    UserMessage,
    parse_event,
)
from ._process import CLIProcess, OversizedLine
from ._tracing import EngineTrace
from .exceptions import ProcessError

if TYPE_CHECKING:
    from ._engine import Engine


async def read(
    engine: Engine, process: CLIProcess, control: ControlChannel, settled: anyio.Event, done: anyio.Event
) -> None:
    """One claude's stdout, to its end: then its exit said, and a crash restarted. What it says before it
    has answered a control request is held, and dropped if it exits first: its start failed, and says so
    (a claude that exits on a config file it cannot read prints an error result on the way)."""
    assert engine._tg is not None
    held: list[Event] = []

    async def flush() -> None:
        while held:
            await _dispatch(engine, held.pop(0))

    async def say(event: Event) -> None:
        if control.answered:
            await flush()
            await _dispatch(engine, event)
        else:
            held.append(event)

    try:
        async for line in process.lines():
            if isinstance(line, OversizedLine):
                await say(
                    ErrorEvent(
                        source="stdout",
                        message=(
                            f"a line longer than {process.max_line_bytes} bytes was dropped: {bytes(line[:80])!r}…"
                        ),
                    )
                )
                continue
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                await say(ErrorEvent(source="stdout", message=f"not a JSON object: {line[:200]!r}"))
                continue
            kind = data.get("type")
            if kind == "control_response":
                control.on_response(data)
                if control.answered:
                    await flush()
            elif kind == "control_request":
                control.on_request(data, engine._tg)
            elif kind == "control_cancel_request":
                control.on_cancel(data)
            elif kind == "transcript_mirror":
                if engine._store.mirror is not None:
                    engine._store.mirror.enqueue(data)
            else:
                await say(parse_event(data))
        code = await process.wait()
        stderr = process.stderr_tail
        control.fail_all(ProcessError(f"claude exited with code {code}", exit_code=code, stderr=stderr))
        await settled.wait()
        if process is not engine._process:  # a start that failed (it says so), or a claude since replaced
            return
        expected = engine._closing
        await engine._emit(ProcessExit(exit_code=code, stderr=stderr[-4000:], expected=expected))
        if not expected:
            await engine._recover(code, stderr)
    finally:
        done.set()


async def _dispatch(engine: Engine, event: Event) -> None:
    if isinstance(event, (SystemInit, Result)) and event.session_id:
        engine.session_id = event.session_id
        engine.trace.set_session_id(event.session_id)
    if engine.trace.on:
        _traced(engine.trace, event)
    if isinstance(event, Result) and engine._store.mirror is not None:
        engine._store.mirror.flush_soon()
    if isinstance(event, Result) and event.structured is not None:
        event = await _typed(engine, event)
    if isinstance(event, Result) and event.is_error and event.api_error_status:
        # before the Result, so a consumer that stops at the end of the turn has seen it
        await engine._emit(
            ErrorEvent(
                source="api",
                status=event.api_error_status,
                message=event.result or f"API error {event.api_error_status}",
            )
        )
    await engine._emit(event)


def _traced(trace: EngineTrace, event: Event) -> None:
    if isinstance(event, CompactBoundary) and not event.is_replay:
        trace.compacted(event.trigger, event.pre_tokens)
    elif isinstance(event, AssistantMessage):
        trace.on_assistant(event)
    elif isinstance(event, UserMessage):
        trace.on_user(event)
    elif isinstance(event, Result) and not event.is_replay:
        trace.end_turn(event)


async def _typed(engine: Engine, result: Result) -> Result:
    """The structured answer as an instance of the pydantic model asked for (kept as JSON if it does not fit)."""
    schema = engine.options.output_schema
    if schema is None or isinstance(schema, Mapping):
        return result
    try:
        return replace(result, structured=schema.model_validate(result.structured))
    except ValueError as e:  # pydantic's ValidationError is one
        await engine._emit(
            ErrorEvent(source="structured_output", message=f"the answer does not fit {schema.__name__}: {e}")
        )
        return result
