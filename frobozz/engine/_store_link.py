"""An engine's link to a session store (`EngineOptions(session_store=...)`): the session to resume, loaded from
the store into a private config directory when this machine has no transcript of it, and the transcript mirror
(`_mirror.py`) that writes what claude writes to its transcript into the store as it goes, its failures said
as MirrorError events. Both are the engine's until it closes: the mirror drained, the loaded copy removed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from .._accounts import hand_over
from . import _transcripts
from ._events import Event, MirrorError
from ._mirror import TranscriptMirror
from ._options import EngineOptions
from ._session_store import Materialized, SessionKey, latest, materialize
from .exceptions import TranscriptNotFoundError

log = logging.getLogger("frobozz.engine")
CLOSE_WAIT = 5.0  # seconds a closing engine waits for the store's last write: a store that answers takes
#   milliseconds; one that hangs held every exit for the whole store timeout (60 s), and claude's own
#   transcript on this machine has what it missed


class StoreLink:
    """One engine's session store: what it resumed from (`materialized`) and what it mirrors to (`mirror`)."""

    def __init__(self, events: MemoryObjectSendStream[Event]) -> None:
        self.mirror: TranscriptMirror | None = None
        self.materialized: Materialized | None = None
        self._send_events = events

    def start_mirror(self, options: EngineOptions, env: dict[str, str], task_group: TaskGroup) -> None:
        assert options.session_store is not None
        self.mirror = TranscriptMirror(
            options.session_store,
            projects_dir=_transcripts.config_dir(env) / "projects",
            project_key=options.session_project,
            flush=options.session_store_flush,
            timeout=options.session_store_timeout,
            on_error=self._on_mirror_error,
        )
        task_group.start_soon(self.mirror.run)

    async def resume(
        self,
        session_id: str | None,
        options: EngineOptions,
        *,
        cwd: Path,
        env: dict[str, str],
        account: tuple[int | None, int | None],
    ) -> str | None:
        """The session to resume, loaded from the store into a private config directory when this machine
        has no transcript of it (for `continue_conversation`, the store's latest when this machine has none).
        `env` is the engine's: its CLAUDE_CONFIG_DIR becomes that directory."""
        store, project = options.session_store, options.session_project
        assert store is not None
        project = project or _transcripts.project_key(cwd)
        timeout = options.session_store_timeout
        if session_id is None and options.continue_conversation and not _transcripts.list_sessions(cwd, env):
            session_id = await latest(store, project, timeout)
        if session_id is None or _transcripts.transcript_path(session_id, cwd, env).is_file():
            return session_id
        self.materialized = await materialize(store, session_id, project_key=project, cwd=cwd, env=env, timeout=timeout)
        if self.materialized is None:
            raise TranscriptNotFoundError(session_id)
        env["CLAUDE_CONFIG_DIR"] = str(self.materialized.config_dir)
        user, group = account
        if user is not None:  # claude, as that account, writes its transcript there
            # the lock file stays this process's: the account could otherwise swap in one a sweep would take
            hand_over(self.materialized.config_dir, user, group, keep=[self.materialized.folder.lock_file])
        return session_id

    async def close(self, timeout: float) -> None:  # noqa: ASYNC109 - a slow store is logged, not an error
        """The mirror's last frames written (for up to `timeout` seconds, at most CLOSE_WAIT), then its writer
        stopped; the copy the session was resumed from removed."""
        mirror, self.mirror = self.mirror, None
        if mirror is not None:  # the last frames, then the writer stops
            with anyio.CancelScope(shield=True):
                if not await mirror.drain(min(timeout, CLOSE_WAIT)):
                    log.warning(
                        "the session store was still writing when the engine closed (%g s on): what it had not "
                        "stored is in claude's own transcript on this machine only",
                        min(timeout, CLOSE_WAIT),
                    )
                elif mirror.held:  # (claude's own transcript on this machine has them)
                    log.error("%d transcript entries were never stored: the store was away to the end", mirror.held)
                mirror.close()
        if self.materialized is not None:
            self.materialized.remove()
            self.materialized = None

    def _on_mirror_error(self, key: SessionKey | None, error: str) -> None:
        session = key["session_id"] if key else ""
        event = MirrorError(
            source="session_store",
            session_id=session,
            subpath=key.get("subpath") if key else None,
            message=f"the session store missed transcript entries of {session}: {error}",
        )
        try:
            self._send_events.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("mirror error event dropped: the event stream is full or closed")
