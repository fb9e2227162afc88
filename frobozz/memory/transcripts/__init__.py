"""claude's session transcripts in Postgres: the engine's session store protocol (and the official Agent
SDK's), so a session moves with the database instead of staying on one machine's disk."""

from ._store import TranscriptStore

__all__ = ["TranscriptStore"]
