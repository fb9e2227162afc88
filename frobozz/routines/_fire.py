"""A firing: one session with the memory loop (orientation, recall, suggestions, archive) in the
routine's namespace, one user message (the prompt, and the mail or entry as marked-off data), recorded
as a run (`frobozz runs` shows it: its turn, cost and result). Limits end it cleanly, saying which."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from frobozz import _spans
from frobozz._plugin_off import plugin_off
from frobozz.engine import AssistantMessage, EngineOptions, Result, Sidecar, WarmSpare
from frobozz.engine.producers import Item, Polling
from frobozz.games import GameError
from frobozz.loop import MemorySession
from frobozz.memory import MemoryService
from frobozz.runner import (
    PlayerError,
    RunConfig,
    RunInfo,
    RunLedger,
    RunNotFoundError,
    RunStore,
    TurnRecord,
    load_template,
    new_info,
    play,
)

from ._spec import Routine
from .settings import RoutineSettings

log = logging.getLogger("frobozz.routines")
HANDLED_WITHIN = 30.0  # seconds the memory loop may take to see the turn end (a backstop: it is at once, but for load)


@dataclass(frozen=True)
class Fired:
    state: str  # done or failed
    reason: str
    run_id: str
    cost_usd: float


def item_json(item: Item) -> dict[str, Any]:
    return {
        "title": item.title,
        "fields": [list(f) for f in item.fields],
        "excerpt": item.excerpt,
        "body": item.body,
        "at": item.at.isoformat() if item.at else None,
    }


def item_from(name: str, key: str, data: dict[str, Any] | None, title: str) -> Item:
    data = data or {}
    return Item(
        source=name,
        key=key,
        title=data.get("title") or title,
        fields=tuple((str(a), str(b)) for a, b in data.get("fields") or ()),
        excerpt=data.get("excerpt") or "",
        body=data.get("body"),
    )


def workspace(spec: Routine, settings: RoutineSettings) -> Path:
    return Path(spec.workspace).expanduser() if spec.workspace else settings.routines_dir / spec.name


def primary_options(spec: Routine, settings: RoutineSettings, cli_path: str | None) -> EngineOptions:
    """The firing's claude: what a warm spare is started with, so that the firing can take it over. The memory loop
    is the firing's: the Frobozz plugin's hooks, if the user installed it, run none (the user's other plugins do)."""
    return EngineOptions(
        model=spec.model,
        cwd=workspace(spec, settings),
        max_turns=spec.max_turns,
        max_budget_usd=spec.max_cost,
        cli_path=cli_path,
        env=plugin_off(),
    )


def sidecar_options(spec: Routine, settings: RoutineSettings, cli_path: str | None) -> EngineOptions:
    """The memory loop's sidecar answers stateless questions (recall's queries, suggestions): any folder will
    do, so one kept warm serves every routine of the same model. No MCP server (a plugin's started its daemon), and
    none of the Frobozz plugin's hooks."""
    return EngineOptions(
        model=spec.model,
        cwd=settings.routines_dir,
        cli_path=cli_path,
        env=plugin_off(),
        strict_mcp_config=True,
        trace_attributes={_spans.SESSION_KIND: "sidecar"},
    )


def run_info(spec: Routine, run_id: str, title: str) -> RunInfo:
    return RunInfo(
        run_id=run_id,
        game=f"routine:{spec.name}",
        story="",
        story_md5="",
        title=title[:200],
        player="claude",
        mode="routine",
        model=spec.model,
        max_turns=spec.max_turns,
        max_cost=spec.max_cost,
        max_seconds=spec.max_seconds,
        multi=False,
        prompt_file=None,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        memory_namespace=spec.namespace_or_default,
    )


def _ended(result: Result | None, timed_out: bool) -> tuple[str, str]:
    if timed_out:
        return "failed", "time limit: the firing ran past --max-seconds and was stopped"
    if result is None:
        return "failed", "claude ended without finishing the turn"
    subtype = result.subtype or ""
    if "max_turns" in subtype:
        return "failed", "max turns: the firing used its --max-turns and was stopped"
    if "budget" in subtype:
        return "failed", "max cost: the firing spent its --max-cost and was stopped"
    if result.is_error:
        return "failed", f"claude reported an error: {(result.result or subtype)[:200]}"
    return "done", "finished"


async def fire(
    spec: Routine,
    key: str,
    title: str,
    item_data: dict[str, Any] | None,
    run_id: str,
    *,
    ledger: RunLedger,
    memory: MemoryService,
    settings: RoutineSettings,
    cli_path: str | None = None,
    spare: WarmSpare | None = None,
    sidecar: Sidecar | None = None,
) -> Fired:
    """Play one firing to its end and record it as run `run_id` (made now, or taken up after a crash). `spare`
    and `sidecar`: claudes the worker keeps started between firings (the firing's first request then waits
    for none to start)."""
    if spec.game:
        return await _game(spec, run_id, ledger=ledger, settings=settings, cli_path=cli_path)
    info = run_info(spec, run_id, title)
    await ledger.add(info, queued=False)
    await ledger.save(info, started_at=datetime.now(UTC))
    folder = workspace(spec, settings)
    folder.mkdir(parents=True, exist_ok=True)
    item = item_from(spec.name, key, item_data, title)
    body = None
    if item.body is not None:
        writer = Polling(spec.prompt, source=spec.name, files=folder / ".frobozz" / "items")
        body = writer.body_file(item)
    message = item.message(spec.prompt, body)
    options = replace(
        primary_options(spec, settings, cli_path),
        trace_attributes={
            _spans.SESSION_KIND: "routine",
            _spans.ROUTINE: spec.name,
            _spans.RUN_ID: run_id,
            _spans.MEMORY_NAMESPACE: spec.namespace_or_default,
        },
    )  # spans only: a warm spare still serves it
    settings.routines_dir.mkdir(parents=True, exist_ok=True)
    said: list[str] = []
    result: Result | None = None
    async with MemorySession(
        options,
        memory,
        namespace=spec.namespace_or_default,
        client=f"routine {spec.name}",
        sidecar=sidecar_options(spec, settings, cli_path),
        deadline=settings.memory_deadline,
        spare=spare,
        shared_sidecar=sidecar,
        recall_queries=settings.routine_recall_queries,
    ) as session:
        info.memory_session = session.id
        await session.send(message)
        with anyio.move_on_after(spec.max_seconds or float("inf")) as timer:
            async for event in session.events():
                if isinstance(event, AssistantMessage) and not event.parent_tool_use_id and event.text.strip():
                    said.append(event.text)
                elif isinstance(event, Result) and not event.is_replay:
                    result = event
                    break
        if timer.cancelled_caught:
            with anyio.move_on_after(5):
                await session.pool.primary.interrupt()
        elif result is not None:  # the loop's observer sees the Result on a task of its own and starts the
            with anyio.move_on_after(HANDLED_WITHIN):  # suggestions, which closing the session then waits for
                await session.handled(1)
    state, reason = _ended(result, timer.cancelled_caught)
    cost = float(result.total_cost_usd or 0.0) if result is not None else 0.0
    info.turns, info.cost_usd, info.done = 1, cost, True
    info.status, info.reason = ("finished" if state == "done" else "failed"), reason
    turn = TurnRecord(
        turn=1,
        command=title[:300],
        text="\n".join(said)[:100_000],
        score=None,
        moves=None,
        location=None,
        done=True,
        won=False,
        reply="\n".join(said)[:100_000],
        cost_usd=cost,
    )
    await ledger.record(info, turn, None)
    await ledger.save(info, ended_at=datetime.now(UTC))
    return Fired(state=state, reason=reason, run_id=run_id, cost_usd=cost)


async def _game(
    spec: Routine, run_id: str, *, ledger: RunLedger, settings: RoutineSettings, cli_path: str | None
) -> Fired:
    """A firing with --game: a run of the game with memory in the routine's namespace (Solitude with Zork),
    the routine's prompt before the game's own instructions. The run is the runner's, recorded by it, under
    the firing's run id: a firing taken up again after its worker died goes on with that run from its last
    committed turn, as a killed queued run does (a run that had ended is not played again)."""
    folder = workspace(spec, settings)
    folder.mkdir(parents=True, exist_ok=True)
    prompt_file = folder / "game-prompt.md"
    default = load_template(None, tools=False).template
    prompt_file.write_text(f"{spec.prompt.strip()}\n\n{default}", encoding="utf-8")
    config = RunConfig(
        game=spec.game or "",
        player="claude",
        model=spec.model,
        max_turns=spec.max_turns,
        max_cost=spec.max_cost,
        max_seconds=spec.max_seconds,
        prompt_file=prompt_file,
        memory=spec.namespace_or_default,
    )
    try:
        try:
            await ledger.get(run_id)
        except RunNotFoundError:  # its first attempt: the game run made under the firing's run id
            info = new_info(config, settings)
            info.run_id = run_id
            await ledger.add(info, queued=False)  # first: a worker killed before its folder is made checks it out
            RunStore.create(settings.runs_dir, info)
        result = await play(RunConfig(resume=run_id), settings, ledger=ledger, cli_path=cli_path)
    except PlayerError as e:
        reason = f"the game run could not start: {e}"[:300]
        with contextlib.suppress(RunNotFoundError):  # its run (made above) ends with the firing, not left running
            info = await ledger.info(run_id)
            info.status, info.reason = "failed", reason
            await ledger.save(info, ended_at=datetime.now(UTC))
            return Fired(state="failed", reason=reason, run_id=run_id, cost_usd=0.0)
        return Fired(state="failed", reason=reason, run_id="", cost_usd=0.0)
    except GameError as e:  # a worker without the game: the firing says so, the worker goes on with the rest
        return Fired(state="failed", reason=f"this worker cannot play {spec.game}: {e}"[:300], run_id="", cost_usd=0.0)
    ended = result.reason in ("won", "died", "game over", "max turns", "max cost", "time limit") or result.done
    return Fired(
        state="done" if ended else "failed",
        reason=f"game run: {result.reason}",
        run_id=result.run_id,
        cost_usd=result.cost_usd,
    )
