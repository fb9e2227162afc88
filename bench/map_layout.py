"""The explored map's grid layout on the whole Zork I walkthrough: rooms, passages, crossings and lines
through rooms, and the seconds the layout took, after 40 steps and after all 396.
Run: `.venv/bin/python bench/map_layout.py` (needs the story file: ../shared/games/zork1.z5)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from frobozz.games import GameSession, GamesSettings, grid_layout, read_story, through_rooms, walkthrough_for

STORY = Path(__file__).resolve().parents[2] / "shared" / "games" / "zork1.z5"


async def main() -> None:
    game = await GameSession.open(read_story(STORY), GamesSettings())
    try:
        steps = walkthrough_for(game.story.md5)
        for n, command in enumerate(steps, 1):
            await game.act(command)
            if n in (40, len(steps)):
                explored = game.map()
                started = time.perf_counter()
                layout = grid_layout(explored)
                took = time.perf_counter() - started
                print(
                    f"after {n:3} steps: {len(layout.places)} rooms, {len(layout.passages)} passages, "
                    f"{layout.crossings} crossings, {through_rooms(layout)} lines through a room, "
                    f"grid {layout.width}x{layout.height}, {took:.2f} s"
                )
    finally:
        await game.aclose()


if __name__ == "__main__":
    anyio.run(main)
