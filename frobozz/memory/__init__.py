"""Long-term memory on Postgres + pgvector, with no MCP in it: the store (write, read, search with
absolute scores), embeddings, migrations, hand-off letters, the memory loop's sessions and archive, and
claude's transcripts (a session store for the engine). The cortex and handoff servers wrap it, as the
game server wraps `frobozz.games`; the memory loop uses it directly."""

from ._bulk import BulkStore
from ._database import (
    DATABASE_ERRORS,
    STOP_HINT,
    apply_migrations,
    close_pool,
    database_url,
    embedded_note,
    embedded_users,
    migrated_pool,
    stop_embedded,
    stop_embedded_at_exit,
    stop_embedded_unused,
)
from ._embeddings import make_embedder
from ._handoffs import MAX_ITEM_CHARS, MAX_ITEMS, HandoffStore, Letter
from ._image_store import ImageStore, MemoryImage
from ._images import THUMBNAIL_EDGE, ImageInput
from ._loop_sessions import ArchiveEntry, Capsule, LoopSession, LoopSessionStore
from ._recall import Recall, memory_line, quietly
from ._records import Forgetting, Hit, Memory, before_said, content_hash, storable, unstorable
from ._search import MAX_QUERY_CHARS, RECALL_MIN_SCORE, Mode
from ._service import MemoryService
from ._store import MemoryStore, check_namespace
from .exceptions import DatabaseError, EmbeddingMismatchError, ImageError, MemoryStoreError
from .settings import MemorySettings
from .transcripts import TranscriptStore

__all__ = [
    "DATABASE_ERRORS",
    "MAX_ITEMS",
    "MAX_ITEM_CHARS",
    "MAX_QUERY_CHARS",
    "RECALL_MIN_SCORE",
    "STOP_HINT",
    "THUMBNAIL_EDGE",
    "ArchiveEntry",
    "BulkStore",
    "Capsule",
    "DatabaseError",
    "EmbeddingMismatchError",
    "Forgetting",
    "HandoffStore",
    "Hit",
    "ImageError",
    "ImageInput",
    "ImageStore",
    "Letter",
    "LoopSession",
    "LoopSessionStore",
    "Memory",
    "MemoryImage",
    "MemoryService",
    "MemorySettings",
    "MemoryStore",
    "MemoryStoreError",
    "Mode",
    "Recall",
    "TranscriptStore",
    "apply_migrations",
    "before_said",
    "check_namespace",
    "close_pool",
    "content_hash",
    "database_url",
    "embedded_note",
    "embedded_users",
    "make_embedder",
    "memory_line",
    "migrated_pool",
    "quietly",
    "stop_embedded",
    "stop_embedded_at_exit",
    "stop_embedded_unused",
    "storable",
    "unstorable",
]
