"""The memory loop around claude turns, on `frobozz.memory`: orientation at the start of every context
window, recall before each user turn, suggestions after it, and the archive of everything said (an
engine observer). Still to come: the session that ties them together, and `frobozz chat`."""

from ._archive import ArchiveObserver
from ._orientation import (Provider, Section, Window, capsules, context_files, here_and_now, latest_letter, memories,
                           orientation)
from ._recall import Recall, recalled_blocks
from ._suggest import Suggester, nudge_blocks

__all__ = ["ArchiveObserver", "Provider", "Recall", "Section", "Suggester", "Window", "capsules", "context_files",
           "here_and_now", "latest_letter", "memories", "nudge_blocks", "orientation", "recalled_blocks"]
