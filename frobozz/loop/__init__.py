"""The memory loop around claude turns: orientation at the start of every context window and recall
before each user turn (so far; suggest, the archive observer and `frobozz chat` are to come), on
`frobozz.memory`."""

from ._orientation import (Provider, Section, Window, capsules, context_files, here_and_now, latest_letter, memories,
                           orientation)
from ._recall import Recall, recalled_blocks

__all__ = ["Provider", "Recall", "Section", "Window", "capsules", "context_files", "here_and_now", "latest_letter",
           "memories", "orientation", "recalled_blocks"]
