"""Prompt files with headers, a question, and a dialogue run through the real claude CLI on the scripted model."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from frobozz.dialogue import Dialogue, DialogueSettings, load_roles

QUESTION = "Should the lantern be kept in the attic or in the cellar?\n"


def prompt(path: Path, role: str, body: str = "Argue from the evidence.") -> Path:
    path.write_text(f"<{role} Prompt: one voice of the dialogue>\n\n{body}\n", encoding="utf-8")
    return path


@pytest.fixture
def prompts(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "prompts"
    folder.mkdir()
    return {
        "a1": prompt(folder / "a1.md", "Architect-1"),
        "a2": prompt(folder / "a2.md", "Architect-2"),
        "scribe": prompt(folder / "scribe.md", "Scribe", "Summarise fairly."),
    }


@pytest.fixture
def roles(prompts):
    return load_roles([("a1", prompts["a1"]), ("a2", prompts["a2"])], prompts["scribe"], limit=100_000)


async def run_dialogue(
    path: Path,
    options,
    roles=None,
    *,
    rounds: int = 3,
    resume: bool = False,
    events=None,
    settings: DialogueSettings | None = None,
):
    """Create (or resume) and run a dialogue; its report."""
    seen = events if events is not None else []
    with anyio.fail_after(600):
        if resume:
            dialogue = Dialogue.resume(path, options=options, settings=settings, on_event=seen.append)
        else:
            dialogue = Dialogue.create(
                path, QUESTION, roles, rounds=rounds, options=options, settings=settings, on_event=seen.append
            )
        return await dialogue.run()
