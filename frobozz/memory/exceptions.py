"""The memory store's errors: one root; each message says what is wrong and what to do."""


class MemoryStoreError(Exception):
    """Root of every error the memory store raises on purpose."""


class DatabaseError(MemoryStoreError):
    """The database cannot be reached or refused the work; nothing was changed."""


class EmbeddingMismatchError(MemoryStoreError):
    """The database's memories were embedded by another model than the one configured."""


class ImageError(MemoryStoreError):
    """An image that cannot be kept (too large, not what it claims to be, outside the allowed folders…)."""
