"""Tools mode, a queued run taken up after its worker died: the game answers an act before the run's
record has it, so the game may be a turn or two ahead of the record. The game's own history, read from
its server as any MCP client reads it, fills in the turns the record missed, so that the two agree again
and the run goes on from where the game really is (never playing a move twice)."""

from __future__ import annotations

import logging
import os
from typing import Any

import anyio

from frobozz._children import dying_with_parent
from frobozz.games import Turn

from ._context import RunContext

log = logging.getLogger("frobozz.runner")
_REACH = 20  # turns of the game's history read back: far more than a record can lag
ASKING = 60.0  # seconds the game server has to start and answer: a server that hangs must not hold the run


async def missed_turns(
    server: dict[str, Any], session_id: str, last: Turn | None, *, within: float = ASKING
) -> list[Turn]:
    """The game's turns after `last` (the record's latest), as its server tells them; [] when they agree or
    the history cannot say (the game ended, `last` is not among its latest turns, or the server did not
    answer within `within` seconds)."""
    # Loaded here, not with the runner: it takes seconds, and `runs`, `worker` and `play` start without it.
    from mcp import Client, StdioServerParameters

    command = dying_with_parent([server["command"], *server["args"]])  # a runner killed meanwhile takes it along
    params = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **server.get("env", {})})
    try:
        with anyio.fail_after(within):
            async with Client(params) as client:
                result = await client.call_tool("history", {"session_id": session_id, "last": _REACH})
    except TimeoutError:
        log.warning("could not read the game's history: its server did not answer within %g s", within)
        return []
    except Exception as e:  # noqa: BLE001 - the game server is help here, not a gate: the run goes on from the record
        log.warning("could not read the game's history: %s", e)
        return []
    if result.is_error or not result.structured_content:
        return []
    turns = [told_turn(t) for t in result.structured_content["turns"]]
    if last is None:
        return [t for t in turns if t.command is not None]
    for i in range(len(turns) - 1, -1, -1):
        t = turns[i]
        if (t.command, t.moves, t.text) == (last.command, last.moves, last.text):
            return turns[i + 1 :]
    return []


def told_turn(told: dict[str, Any]) -> Turn:
    """A turn of the game server's `history`, as a run's record holds it."""
    return Turn(
        number=told["turn"],
        command=told["command"],
        text=told["text"],
        score=told["score"],
        moves=told["moves"],
        location=told["location"],
    )


async def catch_up(context: RunContext, server: dict[str, Any]) -> int:
    """Commit the turns the game played beyond the record; how many."""
    session_id = context.info.game_session
    if not session_id:
        return 0
    missed = await missed_turns(server, session_id, context.current)
    for turn in missed:
        context.commit(turn.command or "", turn, reply="", snapshot=None)
        reason = context.stop_reason(turn)
        if reason:
            context.finish(reason)
            break
    return len(missed)  # (a queued run's turns reach the database once the run's ledger task starts)
