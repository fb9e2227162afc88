"""The memory loop around claude turns: orientation at the start of every context window (so far;
recall, suggest, the archive observer and `frobozz chat` build on it and on `frobozz.memory`)."""

from ._orientation import (Provider, Section, Window, capsules, context_files, here_and_now, latest_letter, memories,
                           orientation)

__all__ = ["Provider", "Section", "Window", "capsules", "context_files", "here_and_now", "latest_letter", "memories",
           "orientation"]
