"""Things that put messages on a session's queue."""

from ._human import HumanInput

__all__ = ["HumanInput"]
