"""Dialogue benchmark: what a three-round dialogue of two agents and a scribe costs with the scripted model —
turns, tool calls by tool, model requests, wall time — and how much of the wall time is the orchestrator's own
(three claude start-ups, skeletons, checkpoints, validation) rather than claude's turns, in one run.

Run: .venv/bin/python bench/dialogue.py [--rounds 3]
Issue 35 names no speed target: the figures are the closing note's "what a dialogue costs". Noisy on a shared
machine: claude's start-up dominates the first turn of each role.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

import anyio

from frobozz.dialogue import Dialogue, ScriptedDialogue, StepFinished, ToolUsed, load_roles
from frobozz.engine import EngineOptions
from frobozz.engine.testing import ScriptedModel


async def run(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, role in (("a1", "Architect-1"), ("a2", "Architect-2"), ("scribe", "Scribe")):
            (root / f"{name}.md").write_text(f"<{role} Prompt: one voice>\nArgue well.\n")
        roles = load_roles([("a1", root / "a1.md"), ("a2", root / "a2.md")], root / "scribe.md", limit=10_000)
        (root / "home").mkdir()
        events: list = []
        async with ScriptedModel(ScriptedDialogue()) as model:
            options = EngineOptions(env={**model.env(), "HOME": str(root / "home"), "CLAUDE_CODE_MAX_RETRIES": "0"})
            started = time.monotonic()
            report = await Dialogue.create(
                root / "d", "Attic or cellar?", roles, rounds=rounds, options=options, on_event=events.append
            ).run()
            wall = time.monotonic() - started
        steps = [e for e in events if isinstance(e, StepFinished)]
        tools = collections.Counter(e.line.split()[1].rstrip(":") for e in events if isinstance(e, ToolUsed))
        main = [r for r in model.requests if r.body.get("tools")]
        in_turns = sum(s.seconds for s in steps)
        print(f"{rounds}-round dialogue, 2 agents and a scribe, scripted model ({report.state.value}):")
        print(
            f"  turns                 {len(steps):6d}   ({sum(s.step.kind == 'agent' for s in steps)} agent, "
            f"{sum(s.step.kind == 'summary' for s in steps)} summary, {sum(s.step.kind == 'synthesis' for s in steps)}"
            " synthesis)"
        )
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(tools.items()))
        print(f"  tool calls            {sum(tools.values()):6d}   ({kinds})")
        print(f"  model requests        {len(main):6d}   (+{len(model.requests) - len(main)} side calls claude makes)")
        print("  per role              " + "; ".join(f"{r.role} {r.turns} turns {r.tools} tools" for r in report.roles))
        print(
            f"  wall time             {wall:8.2f} s   in claude's turns {in_turns:.2f} s; the rest "
            f"({wall - in_turns:.2f} s) is three claude start-ups and the orchestrator's file work"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    anyio.run(run, parser.parse_args().rounds)


if __name__ == "__main__":
    main()
