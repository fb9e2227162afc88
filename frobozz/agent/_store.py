"""The agent service's records in Postgres: sessions, their event log and their tool log, so that after
the service restarts a session is listed, replays what a client missed, and resumes."""

from __future__ import annotations

import builtins
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from frobozz.memory import DATABASE_ERRORS, DatabaseError, MemorySettings, close_pool, migrated_pool

from ._events import Logged, from_data


@dataclass
class SessionRecord:
    id: str
    workspace: str
    owner: str
    token: str | None = None  # the name of the scoped token that made it (never its secret); None: unscoped
    options: dict[str, Any] = field(default_factory=dict)
    preamble: str = ""
    claude_session_id: str | None = None
    memory_session: str | None = None  # the memory loop's session (its archive and windows), with memory on
    status: str = "idle"
    usage: dict[str, Any] = field(default_factory=dict)
    cost_usd: float = 0.0
    created_at: datetime | None = None
    last_activity: datetime | None = None

    def describe(self, path: str, status: str) -> dict[str, Any]:
        """What the API says of a session: its workspace's absolute `path` and its `status` now."""
        memory = (
            {"memory": {"namespace": self.options["memory"]["namespace"], "session": self.memory_session}}
            if self.options.get("memory")
            else {}
        )
        return {
            "session_id": self.id,
            "workspace": path,
            "token": self.token,
            "status": status,
            "usage": self.usage,
            "cost_usd": self.cost_usd,
            "claude_session_id": self.claude_session_id,
            "created_at": _iso(self.created_at),
            "last_activity": _iso(self.last_activity),
            **memory,
        }

    @classmethod
    def of(cls, row: asyncpg.Record) -> SessionRecord:
        return cls(
            id=row["id"],
            workspace=row["workspace"],
            owner=row["owner"],
            token=row["token"],
            options=json.loads(row["options"]),
            preamble=row["preamble"],
            claude_session_id=row["claude_session_id"],
            memory_session=row["memory_session"],
            status=row["status"],
            usage=json.loads(row["usage"]),
            cost_usd=row["cost_usd"],
            created_at=row["created_at"],
            last_activity=row["last_activity"],
        )


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when is not None else None


async def query(pool: asyncpg.Pool, method: str, sql: str, *args: Any) -> Any:
    """`pool.method(sql, *args)`, its failure said as the agent's DatabaseError."""
    async with failures_said():
        return await getattr(pool, method)(sql, *args)


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[PoolConnectionProxy]:
    """A pooled connection in a transaction, its failure said as the agent's DatabaseError (as `query`'s)."""
    async with failures_said(), pool.acquire() as connection, connection.transaction():
        yield connection


@asynccontextmanager
async def failures_said() -> AsyncIterator[None]:
    """A database failure inside, said as the agent's DatabaseError: the service's task group and its HTTP
    routes catch that one, never a driver's own error."""
    try:
        yield
    except DATABASE_ERRORS as e:
        raise DatabaseError(f"the agent service's database failed: {e}") from e


_COLUMNS = (
    "id, workspace, owner, token, options::text, preamble, claude_session_id, memory_session, status, usage::text, "
    "cost_usd, created_at, last_activity"
)


class AgentStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, settings: MemorySettings | None = None, *, size: int = 8) -> AgentStore:
        return cls(await migrated_pool(settings or MemorySettings(), __package__, "agent_migrations", size=size))

    async def aclose(self) -> None:
        await close_pool(self.pool)

    async def _do(self, method: str, sql: str, *args: Any) -> Any:
        return await query(self.pool, method, sql, *args)

    async def add(self, record: SessionRecord) -> SessionRecord:
        row = await self._do(
            "fetchrow",
            f"INSERT INTO agent_sessions (id, workspace, owner, token, options, preamble) "
            f"VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING {_COLUMNS}",
            record.id,
            record.workspace,
            record.owner,
            record.token,
            json.dumps(record.options),
            record.preamble,
        )
        return SessionRecord.of(row)

    async def get(self, session_id: str) -> SessionRecord | None:
        row = await self._do("fetchrow", f"SELECT {_COLUMNS} FROM agent_sessions WHERE id = $1", session_id)
        return SessionRecord.of(row) if row else None

    async def list(self, owners: list[str] | None = None) -> list[SessionRecord]:
        rows = await self._do(
            "fetch",
            f"SELECT {_COLUMNS} FROM agent_sessions WHERE ($1::text[] IS NULL OR "
            "owner = ANY($1)) ORDER BY last_activity DESC, id",
            owners,
        )
        return [SessionRecord.of(r) for r in rows]

    async def update(self, record: SessionRecord, token: int) -> None:
        """Keep what a turn changed, under the session's lease (refused, quietly, once another holds it); its
        `last_activity` becomes the database's now."""
        record.last_activity = (
            await self._do(
                "fetchval",
                "UPDATE agent_sessions SET claude_session_id = $2, status = $3, usage = $4::jsonb, "
                "cost_usd = $5, preamble = $6, memory_session = $7, last_activity = now() "
                "WHERE id = $1 AND EXISTS (SELECT 1 FROM agent_leases WHERE session_id = $1 AND token = $8) "
                "RETURNING last_activity",
                record.id,
                record.claude_session_id,
                record.status,
                json.dumps(record.usage),
                record.cost_usd,
                record.preamble,
                record.memory_session,
                token,
            )
            or record.last_activity
        )

    async def delete(self, session_id: str) -> None:
        """The session and all that is its (its lease row locked first, as an event write locks it: no deadlock)."""
        async with transaction(self.pool) as c:
            await c.execute("SELECT 1 FROM agent_leases WHERE session_id = $1 FOR UPDATE", session_id)
            await c.execute("DELETE FROM agent_sessions WHERE id = $1", session_id)

    async def events(self, session_id: str) -> builtins.list[Logged]:
        rows = await self._do(
            "fetch", "SELECT seq, kind, data::text FROM agent_events WHERE session_id = $1 ORDER BY seq", session_id
        )
        return [Logged(seq=r["seq"], event=from_data(r["kind"], json.loads(r["data"]))) for r in rows]

    async def add_tool_call(self, session_id: str, n: int, call: dict[str, Any], token: int | None) -> None:
        """The session's `n`th tool call, under its lease `token`: refused, quietly, once another instance holds
        it (a call of a turn cut short there must not take the number of one the new holder makes)."""
        await self._do(
            "execute",
            "INSERT INTO agent_tool_calls (session_id, n, call) SELECT $1, $2, $3::jsonb "
            "WHERE EXISTS (SELECT 1 FROM agent_leases WHERE session_id = $1 AND token = $4 FOR SHARE) "
            "ON CONFLICT DO NOTHING",
            session_id,
            n,
            json.dumps(call),
            token,
        )

    async def last_tool_call(self, session_id: str) -> int:
        """The number of the session's last tool call logged (0: none); a call the database could not keep
        leaves a gap, so this is not how many there are."""
        return int(
            await self._do(
                "fetchval", "SELECT coalesce(max(n), 0) FROM agent_tool_calls WHERE session_id = $1", session_id
            )
        )

    async def tool_calls(self, session_id: str) -> builtins.list[dict[str, Any]]:
        rows = await self._do(
            "fetch", "SELECT call::text FROM agent_tool_calls WHERE session_id = $1 ORDER BY n", session_id
        )
        return [json.loads(r[0]) for r in rows]

    async def add_file(self, session_id: str, file_id: str, media_type: str, data: bytes) -> None:
        await self._do(
            "execute",
            "INSERT INTO agent_files (id, session_id, media_type, data) VALUES ($1, $2, $3, $4)",
            file_id,
            session_id,
            media_type,
            data,
        )

    async def file_ids(self, session_id: str, ids: builtins.list[str]) -> set[str]:
        """Which of `ids` are the session's files."""
        rows = await self._do(
            "fetch", "SELECT id FROM agent_files WHERE session_id = $1 AND id = ANY($2)", session_id, ids
        )
        return {r[0] for r in rows}

    async def files(self, session_id: str, ids: builtins.list[str]) -> builtins.list[tuple[str, bytes]]:
        """The session's files `ids`, in that order: (media type, bytes)."""
        rows = {
            r["id"]: (r["media_type"], bytes(r["data"]))
            for r in await self._do(
                "fetch",
                "SELECT id, media_type, data FROM agent_files WHERE session_id = $1 AND id = ANY($2)",
                session_id,
                ids,
            )
        }
        return [rows[i] for i in ids if i in rows]

    async def add_message(
        self,
        session_id: str,
        role: str,
        content: str,
        message_id: str | None,
        token: int | None,
        *,
        interrupted: bool = False,
    ) -> None:
        """The next message of the conversation (a turn's, once: a turn taken over is not recorded twice), under
        the session's lease `token`, as its events are: refused, quietly, once another instance holds it (the
        turn that instance answers again is the one the conversation keeps: its answer replaces one written
        under the lease before, whose turn was cut short before its done). `interrupted`: an agent's reply cut
        short by an interrupt (what was streamed of it)."""
        await self._do(
            "execute",
            "INSERT INTO agent_messages (session_id, n, role, content, message_id, interrupted) "
            "SELECT $1, coalesce(max(n), 0) + 1, $2, $3, $4, $6 FROM agent_messages WHERE session_id = $1 "
            "HAVING EXISTS (SELECT 1 FROM agent_leases WHERE session_id = $1 AND token = $5 FOR SHARE) "
            "ON CONFLICT (session_id, message_id, role) WHERE message_id IS NOT NULL "
            "DO UPDATE SET content = EXCLUDED.content, interrupted = EXCLUDED.interrupted, at = now() "
            "WHERE agent_messages.role = 'agent'",
            session_id,
            role,
            content,
            message_id,
            token,
            interrupted,
        )

    async def messages(self, session_id: str) -> builtins.list[dict[str, Any]]:
        rows = await self._do(
            "fetch",
            "SELECT n, role, content, at, message_id, interrupted FROM agent_messages WHERE session_id = $1 ORDER BY n",
            session_id,
        )
        return [  # message_id: the turn's (a user's message's own id; its answer's, the message it answers)
            {
                "id": r["n"],
                "role": r["role"],
                "content": r["content"],
                "time": r["at"].isoformat(),
                "message_id": r["message_id"],
                "interrupted": r["interrupted"],  # an agent's reply cut short: what was streamed of it
            }
            for r in rows
        ]
