"""Runner overhead: the runner's own time per turn (game step, commit, snapshot, transcript; no
model), and the whole walkthrough's wall time against the bare CLI doing the same turns, one run.

Run: bin/frobozz games list >/dev/null; .venv/bin/python bench/play_overhead.py
Target (issue 4): runner overhead under 10 ms per turn.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import anyio

from frobozz.engine import find_claude
from frobozz.engine.testing import ScriptedModel
from frobozz.games import GameLibrary, walkthrough_for
from frobozz.runner import RunConfig, RunnerSettings, play
from frobozz.runner._players import text_handler
from frobozz.runner._prompts import status_header
from frobozz.games import Turn


def bare_cli(commands: list[str], home: str) -> float:
    """The bare CLI answering the same number of game-shaped messages from the same scripted model."""
    with ScriptedModel(text_handler(commands)) as model:
        env = {**os.environ, **model.env(), "HOME": home}
        command = [find_claude(), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
                   "--verbose", "--tools", ""]
        t0 = time.perf_counter()
        with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, cwd=home) as process:
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


async def runner(settings: RunnerSettings) -> tuple[float, float, int]:
    contexts = []
    t0 = time.perf_counter()
    result = await play(RunConfig(game="zork1", player="walkthrough"), settings,
                        on_turn=lambda context, record: contexts.append(context) if not contexts else None)
    wall = time.perf_counter() - t0
    assert result.won and result.score == 350, result
    return wall, contexts[0].own_seconds, result.turns


def main() -> None:
    settings = RunnerSettings().model_copy(update={"data_dir": Path(tempfile.mkdtemp(prefix="frobozz-bench-"))})
    commands = walkthrough_for(GameLibrary(settings).find("zork1").md5)
    wall, own, turns = anyio.run(runner, settings)
    bare = bare_cli(commands, tempfile.mkdtemp())
    print(f"Zork I walkthrough, {turns} turns, scripted model, text mode")
    print(f"  runner's own time per turn     {1000 * own / turns:8.2f} ms   (target < 10 ms)")
    print(f"  whole run (runner + claude)    {wall:8.2f} s    {1000 * wall / turns:6.1f} ms/turn")
    print(f"  bare claude CLI, same turns    {bare:8.2f} s    {1000 * bare / turns:6.1f} ms/turn")
    print(f"  difference per turn            {1000 * (wall - bare) / turns:8.2f} ms   "
          "(includes start-up, reports and images)")


if __name__ == "__main__":
    main()
