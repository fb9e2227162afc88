"""Runner overhead: the runner's own time per turn (game step, commit, snapshot, transcript; with
--memory also recall, orientation and archive; no model), and the whole walkthrough's wall time
against the bare CLI doing the same turns, one run. With --memory, also tools mode's part: the game
server's act with recall on (the same queries and threshold, in the game server) against without.

Run: bin/frobozz games list >/dev/null; .venv/bin/python bench/play_overhead.py [--memory] [--others 10000]
Targets: runner overhead under 10 ms per turn (issue 4); memory adds under 30 ms per turn p50, with
cortex holding 10k memories of other games (issue 15).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time

import anyio
from _ending import end_with_the_bench

from frobozz.engine import find_claude
from frobozz.engine.testing import ScriptedModel
from frobozz.games import GameLibrary, Turn, walkthrough_for
from frobozz.memory import BulkStore, MemoryService, MemorySettings
from frobozz.memory._database import stop_embedded
from frobozz.runner import RunConfig, RunnerSettings, play
from frobozz.runner._players import text_handler
from frobozz.runner._prompts import status_header

TARGET_MS, TARGET_MEMORY_MS = 10, 30
GAMES = ["enchanter", "planetfall", "hitchhiker", "spellbreaker", "deadline", "wishbringer", "trinity", "lurking"]
ROOMS = [
    "the Library",
    "the Engine Room",
    "a Dusty Corridor",
    "the Observatory",
    "the Cellar",
    "the Kitchen",
    "the Tower Top",
    "a Marsh",
    "the Hall of Mirrors",
    "the Crypt",
    "the Bridge",
    "the Galley",
]
THINGS = ["brass key", "scroll", "lantern", "rope", "gold coin", "dusty book", "lever", "crystal", "wand", "map"]
ACTS = [
    "is found under the rug in",
    "opens the door of",
    "must be carried before entering",
    "is guarded in",
    "is the way out of",
    "breaks if dropped in",
    "glows near the exit of",
]


def bare_cli(commands: list[str], home: str) -> float:
    """The bare CLI answering the same number of game-shaped messages from the same scripted model."""
    with ScriptedModel(text_handler(commands)) as model:
        env = {**os.environ, **model.env(), "HOME": home}
        command = [
            find_claude(),
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--tools",
            "",
        ]
        t0 = time.perf_counter()
        with subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=home
        ) as process:
            assert process.stdin and process.stdout
            for n in range(len(commands)):
                header = status_header("Zork I", Turn(n, None, "", 0, n, "Somewhere"), 350, n, None)
                message = {"type": "user", "message": {"role": "user", "content": f"{header}\n\nYou are somewhere."}}
                process.stdin.write(json.dumps(message).encode() + b"\n")
                process.stdin.flush()
                for line in process.stdout:
                    if b'"type":"result"' in line:
                        break
            process.stdin.close()
            process.wait()
        return time.perf_counter() - t0


async def other_games(count: int) -> str:
    """cortex holding `count` memories of other games (each in its game's namespace), as play finds it."""
    rng = random.Random(15)
    service = MemoryService(MemorySettings())
    try:
        bulk = BulkStore(await service.store())
        t0 = time.perf_counter()
        for start in range(0, count, 500):
            await bulk.import_batch(
                [
                    {
                        "namespace": rng.choice(GAMES),
                        "content": (f"The {rng.choice(THINGS)} {rng.choice(ACTS)} {rng.choice(ROOMS)} (note {n})."),
                    }
                    for n in range(start, min(count, start + 500))
                ],
                None,
            )
        return f"stored {count} memories of other games in {time.perf_counter() - t0:.0f} s"
    finally:
        await service.aclose()


async def game_acts(commands: list[str], recall: bool) -> list[float]:
    """Seconds per act through the game server (in process, as MCP), recalling in zork1's namespace or not."""
    from mcp import Client

    from frobozz.servers.game import Settings, create_server

    session = None
    if recall:
        service = MemoryService(MemorySettings())
        try:
            session = (await (await service.sessions()).open("zork1", client="bench")).id
        finally:
            await service.aclose()
    settings = Settings(game_recall_namespace="zork1" if recall else None, game_recall_session=session)
    times = []
    async with Client(create_server(settings)) as client:
        sid = (await client.call_tool("new_game", {"game": "zork1"})).structured_content["session_id"]
        await client.call_tool("look", {"session_id": sid})
        for command in commands:
            t0 = time.perf_counter()
            await client.call_tool("act", {"session_id": sid, "command": command})
            times.append(time.perf_counter() - t0)
    return times


async def runner(settings: RunnerSettings, memory: str | None) -> tuple[float, list[float], int]:
    contexts = []
    t0 = time.perf_counter()
    result = await play(
        RunConfig(game="zork1", player="walkthrough", memory=memory),
        settings,
        on_turn=lambda context, record: contexts.append(context) if not contexts else None,
    )
    wall = time.perf_counter() - t0
    assert result.won and result.score == 350, result
    return wall, contexts[0].own_turns, result.turns


def ms(values: list[float], q: int) -> float:
    return 1000 * statistics.quantiles(values, n=100)[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", action="store_true", help="also play with memory on, and compare")
    parser.add_argument("--others", type=int, default=10_000, help="memories of other games in cortex")
    args = parser.parse_args()
    story = GameLibrary(RunnerSettings()).find("zork1")  # where it is installed
    os.environ.setdefault("FROBOZZ_GAMES_DIR", str(story.path.parent))
    os.environ["FROBOZZ_DATA_DIR"] = tempfile.mkdtemp(prefix="frobozz-bench-")  # runs, memory, servers' data
    settings = RunnerSettings()
    commands = walkthrough_for(story.md5)
    try:
        if args.memory:
            print(anyio.run(other_games, args.others))
        wall, own, turns = anyio.run(runner, settings, None)
        print(f"Zork I walkthrough, {turns} turns, scripted model, text mode")
        print(
            f"  runner's own time per turn     {1000 * sum(own) / turns:8.2f} ms   (target < {TARGET_MS} ms)"
            f"   p50 {ms(own, 50):.2f} ms"
        )
        if args.memory:
            mwall, mown, _ = anyio.run(runner, settings, "")
            added = ms(mown, 50) - ms(own, 50)
            print(
                f"  --memory: runner's own time    p50 {ms(mown, 50):8.2f} ms   p95 {ms(mown, 95):.2f} ms   "
                f"first message (orientation) {1000 * mown[0]:.1f} ms"
            )
            print(
                f"  memory adds per turn, p50      {added:8.2f} ms   ({added / TARGET_MEMORY_MS:.2f}x the "
                f"{TARGET_MEMORY_MS} ms target; recall, archive, orientation)"
            )
            print(f"  --memory whole run             {mwall:8.2f} s    {1000 * mwall / turns:6.1f} ms/turn")
            plain_acts, recall_acts = anyio.run(game_acts, commands, False), anyio.run(game_acts, commands, True)
            added = ms(recall_acts[1:], 50) - ms(plain_acts[1:], 50)
            print(
                f"  tools mode: game server's act  p50 {ms(plain_acts, 50):8.2f} ms without recall, "
                f"{ms(recall_acts[1:], 50):.2f} ms with (p95 {ms(recall_acts[1:], 95):.2f}; first act "
                f"{1000 * recall_acts[0]:.0f} ms)"
            )
            print(
                f"  recall adds per act, p50       {added:8.2f} ms   ({added / TARGET_MEMORY_MS:.2f}x the "
                f"{TARGET_MEMORY_MS} ms target)"
            )
        bare = bare_cli(commands, tempfile.mkdtemp())
        print(f"  whole run (runner + claude)    {wall:8.2f} s    {1000 * wall / turns:6.1f} ms/turn")
        print(f"  bare claude CLI, same turns    {bare:8.2f} s    {1000 * bare / turns:6.1f} ms/turn")
        print(
            f"  difference per turn            {1000 * (wall - bare) / turns:8.2f} ms   "
            "(includes start-up, reports and images)"
        )
    finally:
        stop_embedded(MemorySettings(), delete=True)


if __name__ == "__main__":
    end_with_the_bench()  # the scratch Postgres goes with the bench
    main()
