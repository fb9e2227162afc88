"""The memory loop around claude turns, on `frobozz.memory`: orientation at the start of every context
window, recall before each user turn, suggestions after it, the archive of everything said (an engine
observer), capsules of earlier conversation, and MemorySession, which puts them around a claude
session (primary and sidecar). Suggestions and capsules are background work: each of their steps on the
database goes through a guard (`bounded_steps`), and one it leaves out ends the work (LeftOut)."""

from ._archive import ArchiveObserver
from ._capsules import refresh_capsules
from ._orientation import (
    Provider,
    Section,
    Window,
    capsules,
    context_files,
    here_and_now,
    latest_letter,
    memories,
    orientation,
)
from ._recalled_blocks import recalled_blocks
from ._session import MemorySession
from ._steps import BackgroundStep, LeftOut, bounded_steps
from ._suggest import Suggester, nudge_blocks

__all__ = [
    "ArchiveObserver",
    "BackgroundStep",
    "LeftOut",
    "MemorySession",
    "Provider",
    "Section",
    "Suggester",
    "Window",
    "bounded_steps",
    "capsules",
    "context_files",
    "here_and_now",
    "latest_letter",
    "memories",
    "nudge_blocks",
    "orientation",
    "recalled_blocks",
    "refresh_capsules",
]
