"""`TranscriptStore`: the session store protocol (the engine's, and the official Agent SDK's) on Postgres.

Entries are JSONB rows in the order they were appended; claude's entry `uuid` is the idempotency key (a
batch the mirror retried is kept once); a main transcript's summary is folded inside `append`, under a
per-session advisory lock, in the same transaction as its entries; deleting a session takes its
subagents' transcripts with it. A NUL in an entry's text (which Postgres' JSON cannot hold) is taken out, as
the loop's archive does, a lone surrogate made U+FFFD, and the rest of the entry kept. Same database as everything else
(FROBOZZ_DATABASE_URL, or embedded).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypedDict, TypeVar

import asyncpg
import orjson

from ..._session_summary import fold_summary
from .._database import DATABASE_ERRORS, POOL_CLOSE_TIMEOUT, apply_migrations, close_pool, migrated_pool
from .._records import storable
from ..exceptions import DatabaseError, MemoryStoreError
from ..settings import MemorySettings

T = TypeVar("T")


class Listed(TypedDict):  # the engine's SessionStoreListEntry, which memory may not import
    session_id: str
    mtime: int


class Summary(TypedDict):  # the engine's SessionSummaryEntry
    session_id: str
    mtime: int
    data: dict[str, Any]


LEDGER = "transcript_migrations"
_NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _parts(key: Mapping[str, Any]) -> tuple[str, str, str]:
    project, session, subpath = key.get("project_key"), key.get("session_id"), key.get("subpath") or ""
    if (
        not isinstance(project, str)
        or not isinstance(session, str)
        or not isinstance(subpath, str)
        or not project
        or not session
        or "\x00" in project + session + subpath
    ):
        raise MemoryStoreError(f"a session key needs a project_key and a session_id (text): {dict(key)!r:.200}")
    return project, session, subpath


def _texts(entries: list[dict[str, Any]]) -> list[str] | None:
    """The entries as JSON texts; None when a text in one is not UTF-8 (a lone surrogate)."""
    try:
        return [orjson.dumps(e).decode() for e in entries]
    except orjson.JSONEncodeError:
        return None


class TranscriptStore:
    """`await TranscriptStore.open(settings)`, or `TranscriptStore(pool)` over a migrated pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, settings: MemorySettings | None = None, *, size: int = 4) -> TranscriptStore:
        return cls(await migrated_pool(settings or MemorySettings(), __package__, LEDGER, size=size))

    @classmethod
    async def on(cls, pool: asyncpg.Pool) -> TranscriptStore:
        """On a pool another part opened on the same database (the runs' ledger): its tables made first.
        Closing it is the pool owner's business."""
        try:
            await apply_migrations(pool, __package__, LEDGER)
        except DATABASE_ERRORS as e:
            raise DatabaseError(f"the transcript store's tables could not be made: {e}") from e
        return cls(pool)

    async def aclose(self, timeout: float = POOL_CLOSE_TIMEOUT) -> None:  # noqa: ASYNC109 - the pool's patience
        """`timeout`: how long connections still in use are waited for (a caller whose engine has closed has none
        of its own left: what is still in use hangs on a database that does not answer)."""
        await close_pool(self.pool, timeout)

    async def _run(self, work: Callable[..., Awaitable[T]], *args: Any) -> T:
        try:
            async with self.pool.acquire() as connection:
                return await work(connection, *args)
        except asyncpg.UntranslatableCharacterError as e:
            raise MemoryStoreError(f"an entry has text Postgres cannot keep (a NUL character?): {e}") from e
        except DATABASE_ERRORS as e:
            raise DatabaseError(f"the transcript store failed: {e}") from e

    # -- required ------------------------------------------------------------------------------------
    async def append(self, key: Mapping[str, Any], entries: list[dict[str, Any]]) -> None:
        project, session, subpath = _parts(key)
        if not entries:
            return
        texts = _texts(entries)
        if texts is None or any("\\u0000" in t for t in texts):  # (a backslash before "u0000": no harm)
            entries = [storable(e) for e in entries]
            texts = _texts(entries)
            if texts is None:
                raise MemoryStoreError("an entry cannot be kept as JSON")
        uuids = [e.get("uuid") if isinstance(e.get("uuid"), str) else None for e in entries]
        await self._run(self._append, project, session, subpath, uuids, texts, entries)

    @staticmethod
    async def _append(
        connection: asyncpg.Connection,
        project: str,
        session: str,
        subpath: str,
        uuids: list[str | None],
        texts: list[str],
        entries: list[dict[str, Any]],
    ) -> None:
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{project}/{session}")
            old = await connection.fetchrow(
                "SELECT mtime, summary::text AS summary FROM claude_transcripts "
                "WHERE project_key = $1 AND session_id = $2 AND subpath = $3",
                project,
                session,
                subpath,
            )
            mtime = await connection.fetchval(f"SELECT GREATEST({_NOW_MS}, $1::bigint + 1)", old["mtime"] if old else 0)
            summary = None
            if not subpath:
                previous = orjson.loads(old["summary"]) if old and old["summary"] else None
                summary = {**fold_summary(previous, {"session_id": session}, entries), "mtime": mtime}
            await connection.execute(
                "INSERT INTO claude_transcripts (project_key, session_id, subpath, mtime, summary) "
                "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (project_key, session_id, subpath) "
                "DO UPDATE SET mtime = EXCLUDED.mtime, summary = EXCLUDED.summary",
                project,
                session,
                subpath,
                mtime,
                orjson.dumps(summary).decode() if summary else None,
            )
            await connection.execute(
                "INSERT INTO claude_transcript_entries (project_key, session_id, subpath, uuid, entry) "
                "SELECT $1, $2, $3, u, e::jsonb FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS t(u, e, n) "
                "ORDER BY n ON CONFLICT (project_key, session_id, subpath, uuid) WHERE uuid IS NOT NULL DO NOTHING",
                project,
                session,
                subpath,
                uuids,
                texts,
            )

    async def load(self, key: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        project, session, subpath = _parts(key)

        async def load(connection: asyncpg.Connection) -> list[dict[str, Any]] | None:
            async with connection.transaction(isolation="repeatable_read", readonly=True):
                if not await connection.fetchval(
                    "SELECT true FROM claude_transcripts WHERE project_key = $1 AND session_id = $2 AND subpath = $3",
                    project,
                    session,
                    subpath,
                ):
                    return None
                rows = await connection.fetch(
                    "SELECT entry::text FROM claude_transcript_entries WHERE project_key = $1 AND session_id = $2 "
                    "AND subpath = $3 ORDER BY seq",
                    project,
                    session,
                    subpath,
                )
            return [orjson.loads(r[0]) for r in rows]

        return await self._run(load)

    # -- optional ------------------------------------------------------------------------------------
    async def list_sessions(self, project_key: str) -> list[Listed]:
        rows = await self._run(
            lambda c: c.fetch(
                "SELECT session_id, mtime FROM claude_transcripts WHERE project_key = $1 AND subpath = '' "
                "ORDER BY mtime DESC",
                project_key,
            )
        )
        return [{"session_id": r["session_id"], "mtime": r["mtime"]} for r in rows]

    async def list_session_summaries(self, project_key: str) -> list[Summary]:
        rows = await self._run(
            lambda c: c.fetch(
                "SELECT summary::text FROM claude_transcripts WHERE project_key = $1 AND subpath = '' "
                "AND summary IS NOT NULL ORDER BY mtime DESC",
                project_key,
            )
        )
        return [orjson.loads(r[0]) for r in rows]

    async def delete(self, key: Mapping[str, Any]) -> None:
        """A main transcript with its subagents' (the entries go by cascade), or one subagent's alone."""
        project, session, subpath = _parts(key)
        await self._run(
            lambda c: c.execute(
                "DELETE FROM claude_transcripts WHERE project_key = $1 AND session_id = $2"
                " AND ($3 = '' OR subpath = $3)",
                project,
                session,
                subpath,
            )
        )

    async def list_subkeys(self, key: Mapping[str, Any]) -> list[str]:
        project, session, _ = _parts(key)
        rows = await self._run(
            lambda c: c.fetch(
                "SELECT subpath FROM claude_transcripts WHERE project_key = $1 AND session_id = $2 AND subpath <> '' "
                "ORDER BY subpath",
                project,
                session,
            )
        )
        return [r["subpath"] for r in rows]
