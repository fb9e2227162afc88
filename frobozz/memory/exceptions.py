"""The memory store's errors: one root; each message says what is wrong and what to do."""


class MemoryStoreError(Exception):
    """Root of every error the memory store raises on purpose."""


class DatabaseError(MemoryStoreError):
    """The database cannot be reached or refused the work; nothing was changed."""


class EmbeddingMismatchError(MemoryStoreError):
    """The database's memories were embedded by another model than the one configured."""
