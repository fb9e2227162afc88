"""Cortex's errors: one root; each message says what is wrong and what to do."""


class CortexError(Exception):
    """Root of every error cortex raises on purpose."""


class DatabaseError(CortexError):
    """The database cannot be reached or refused the work; nothing was changed."""


class EmbeddingMismatchError(CortexError):
    """The database's memories were embedded by another model than the one configured."""
