"""Zork I's 396-step walkthrough through `frobozz serve game` over stdio, against raw jericho.

Run: bin/frobozz games list >/dev/null; .venv/bin/python bench/game_steps.py [--rounds N]
Prints steps/s for each path and the ratio of the stdio server's time to raw jericho's, one run.
Target (issue 2): the whole walkthrough over stdio in under 1 s; raw jericho takes about 0.06 s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import anyio

from frobozz.cli._walkthrough import play_walkthrough
from frobozz.games import GameLibrary, GamesSettings, walkthrough_for


def raw_jericho(path: Path, steps: list[str]) -> float:
    import jericho

    warnings.simplefilter("ignore")
    env = jericho.FrotzEnv(str(path))
    env.reset()
    t0 = time.perf_counter()
    for command in steps:
        env.step(command)
    elapsed = time.perf_counter() - t0
    assert env.get_score() == 350, env.get_score()
    env.close()
    return elapsed


async def over_stdio(settings: GamesSettings) -> tuple[float, float]:
    """(seconds for the 396 act calls, seconds including server start and new_game)."""
    t0 = time.perf_counter()
    result = await play_walkthrough("zork1", settings)
    assert result["score"] == 350 and result["won"], result
    return result["seconds"], time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    base = GamesSettings()
    settings = base.model_copy(update={"data_dir": Path(tempfile.mkdtemp(prefix="frobozz-bench-"))})
    story = GameLibrary(settings).find("zork1")
    steps = walkthrough_for(story.md5)

    raw = [raw_jericho(story.path, steps) for _ in range(rounds)]
    stdio = [anyio.run(over_stdio, settings) for _ in range(rounds)]
    raw_s = statistics.median(raw)
    act_s = statistics.median(s for s, _ in stdio)
    whole_s = statistics.median(w for _, w in stdio)
    n = len(steps)
    print(f"walkthrough: {n} steps, median of {rounds} rounds")
    print(f"  raw jericho (in process)       {raw_s:8.3f} s   {n / raw_s:9.0f} steps/s")
    print(
        f"  game server over stdio (acts)  {act_s:8.3f} s   {n / act_s:9.0f} steps/s   {1000 * act_s / n:.2f} ms/step"
    )
    print(f"  ... with server start + new    {whole_s:8.3f} s")
    print(f"  ratio stdio / raw jericho      {act_s / raw_s:8.1f} x   (target: whole walkthrough < 1 s)")


if __name__ == "__main__":
    main()
