"""Play a walkthrough through the real `frobozz serve game` over stdio, as any MCP client would."""

from __future__ import annotations

import sys
import time
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.markup import escape

from frobozz.games import GameError, GameLibrary, GamesSettings, walkthrough_for


def server_params(settings: GamesSettings) -> StdioServerParameters:
    """`frobozz serve game` in this interpreter, with the caller's data and games directories."""
    env = {"FROBOZZ_DATA_DIR": str(settings.data_dir)}
    if settings.games_dir:
        env["FROBOZZ_GAMES_DIR"] = str(settings.games_dir)
    return StdioServerParameters(command=sys.executable, args=["-m", "frobozz", "serve", "game"], env=env)


async def play_walkthrough(game: str, settings: GamesSettings, *, progress: Console | None = None) -> dict[str, Any]:
    story = GameLibrary(settings).find(game)
    steps = walkthrough_for(story.md5)
    if not steps:
        raise GameError(f"{story.path.name} has no known walkthrough")
    async with Client(server_params(settings)) as client:
        started = await client.call_tool("new_game", {"game": game})
        if started.is_error:
            raise GameError(started.content[0].text)  # type: ignore[union-attr]  # a tool error is one TextContent
        session_id = started.structured_content["session_id"]
        t0 = time.perf_counter()
        for i, command in enumerate(steps, 1):
            result = await client.call_tool("act", {"session_id": session_id, "command": command})
            if result.is_error:
                raise GameError(f"step {i} ({command!r}): {result.content[0].text}")  # type: ignore[union-attr]  # as above
            state = result.structured_content
            if progress and (i % 50 == 0 or i == len(steps)):
                where = escape(str(state["location"]))
                progress.print(f"[dim]{i:>4}/{len(steps)}  score {state['score']}/{state['max_score']}  {where}[/dim]")
        seconds = time.perf_counter() - t0
        await client.call_tool("end_game", {"session_id": session_id})
    return {
        "game": game,
        "session_id": session_id,
        "steps": len(steps),
        "score": state["score"],
        "max_score": state["max_score"],
        "moves": state["moves"],
        "won": state["won"],
        "done": state["done"],
        "seconds": seconds,
        "last_text": state["text"],
    }
