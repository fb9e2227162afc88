"""Workspaces: `ROOT/<user>/<name>`, each with the MCP servers and skills of its hierarchy.

MCP servers come from the platform directory's `.mcp.json`, then the user's, then the workspace's own,
a later one replacing an earlier one of the same name; every stdio server gets the workspace's absolute
path as WORKSPACE_PATH. Skills from the platform's and the user's `skills/*/` are copied into the
workspace's `.claude/skills/` before a session starts: the workspace's own skills win, and a skill gone
upstream is removed only if the sync put it there (a manifest says which).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _inside as inside
from ._owners import Owners
from .exceptions import WorkspaceError

log = logging.getLogger("frobozz.agent.workspaces")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MANIFEST = ".frobozz-synced.json"


@dataclass(frozen=True)
class Workspace:
    user: str
    name: str
    path: Path  # absolute and real
    user_dir: Path
    account: tuple[int, int] | None = None  # (uid, gid) its claude runs as; None: as the service

    @property
    def spec(self) -> str:
        return f"{self.user}/{self.name}"


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


class Workspaces:
    """The workspaces under `root` (`<user>/<name>`), each with the MCP servers and skills of its hierarchy."""

    def __init__(
        self, root: Path, platform_dir: Path | None = None, *, first_uid: int = 2_000_000, accounts: bool | None = None
    ) -> None:
        """`accounts`: run each claude as its workspace's owner (default: when the service is root)."""
        self.root = Path(root).resolve()
        self.platform_dir = Path(platform_dir).resolve() if platform_dir else None
        self.owners = Owners(self.root, first_uid=first_uid, active=accounts)

    def resolve(self, spec: Any, *, create: bool = True) -> Workspace:
        """`user/name` as a workspace under the root, made if missing; anything that would leave the root
        (`..`, an absolute path, a symlink out, another user's folder) is refused, and nothing is made."""
        if not isinstance(spec, str) or not spec:
            raise WorkspaceError("a workspace is named `user/name`")
        if spec.startswith(("/", "\\")) or os.path.isabs(spec):
            raise WorkspaceError(f"a workspace is a path under the root, not an absolute path: {spec[:200]!r}")
        parts = spec.split("/")
        if ".." in parts or any(p in (".", "") for p in parts):
            raise WorkspaceError(f"a workspace may not leave the root (no '..', '.' or empty parts): {spec[:200]!r}")
        if len(parts) != 2 or not all(_NAME.fullmatch(p) for p in parts):
            raise WorkspaceError(f"a workspace is named `user/name` (letters, digits, '_', '.', '-'): {spec[:200]!r}")
        user, name = parts
        user_dir, path = self.root / user, self.root / user / name
        for found, parent in ((user_dir, self.root), (path, user_dir)):
            if found.is_symlink() or (found.exists() and found.resolve() != parent.resolve() / found.name):
                raise WorkspaceError(f"{found.relative_to(self.root)} is a link; a workspace stays under the root")
        if path.exists() and not path.is_dir():
            raise WorkspaceError(f"{spec} is not a folder")
        if not _under(path.resolve(), self.root):
            raise WorkspaceError(f"{spec} resolves outside the root")
        if not path.exists():
            if not create:
                raise WorkspaceError(f"no workspace {spec}")
            self._make(user_dir, path, spec)
        return Workspace(
            user=user, name=name, path=path.resolve(), user_dir=user_dir.resolve(), account=self.owners.of(path, spec)
        )

    def _make(self, user_dir: Path, path: Path, spec: str) -> None:
        """A new workspace, its owner decided before anything is made: the user folder's, or a new user's own."""
        self.root.mkdir(parents=True, exist_ok=True)
        owner = self.owners.of(user_dir, spec) if user_dir.exists() else self.owners.for_new_user()
        if not user_dir.exists():
            user_dir.mkdir(mode=0o700 if owner else 0o777)
            self.owners.hand_over(user_dir, owner)
        path.mkdir(mode=0o700 if owner else 0o777)
        self.owners.hand_over(path, owner)

    # -- MCP servers ------------------------------------------------------------------------------
    def mcp_servers(self, workspace: Workspace) -> dict[str, dict[str, Any]]:
        """The servers of the hierarchy, a later level replacing an earlier one by name."""
        servers: dict[str, dict[str, Any]] = {}
        for level in (self.platform_dir, workspace.user_dir, workspace.path):
            if level is not None:
                servers.update(_read_servers(level / ".mcp.json"))
        for server in servers.values():
            if "command" in server and server.get("type", "stdio") == "stdio":
                env = dict(server.get("env") or {})
                env.setdefault("WORKSPACE_PATH", str(workspace.path))
                server["env"] = env
        return servers

    # -- skills -----------------------------------------------------------------------------------
    def sync_skills(self, workspace: Workspace) -> list[str]:
        """Copy the platform's and the user's skills into the workspace (the user's over the platform's,
        the workspace's own over both); remove those the sync put there that are gone upstream. The names
        the sync keeps, sorted."""
        upstream: dict[str, Path] = {}
        for level in (self.platform_dir, workspace.user_dir):
            skills = level / "skills" if level is not None else None
            if skills is not None and skills.is_dir() and not skills.is_symlink():
                for skill in sorted(skills.iterdir()):
                    if skill.is_dir() and not skill.is_symlink() and _NAME.fullmatch(skill.name):
                        upstream[skill.name] = skill
        if not upstream and not (workspace.path / ".claude" / "skills" / MANIFEST).is_file():
            return []  # nothing to sync, nothing synced before: the workspace is left as it is
        owner = workspace.account
        with inside.folder(workspace.path, (".claude", "skills"), owner) as target:
            synced = inside.read_json(target, MANIFEST)
            synced = synced if isinstance(synced, dict) else {}
            kept: dict[str, str] = {}
            for name, source in upstream.items():
                there = inside.kind(target, name)
                if there is not None and name not in synced:
                    continue  # the workspace's own skill of that name wins
                digest = _digest(source)
                if there is None or synced.get(name) != digest:
                    inside.remove(target, name)
                    inside.copy_tree(source, target, name, owner)
                kept[name] = digest
            for name in set(synced) - set(kept):
                if _NAME.fullmatch(str(name)):
                    inside.remove(target, name)  # put there by the sync, gone upstream
            inside.write(target, MANIFEST, json.dumps(kept, indent=1, sort_keys=True).encode(), owner)
        return sorted(kept)


def write_inside(workspace: Workspace, parts: tuple[str, ...], name: str, text: str) -> Path:
    """A file the service makes in a workspace (`parts…/name`), never written through a link; the owner's."""
    with inside.folder(workspace.path, parts, workspace.account) as fd:
        inside.write(fd, name, text.encode("utf-8"), workspace.account)
    return workspace.path.joinpath(*parts, name)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise WorkspaceError(f"{path} is not readable JSON: {e}") from e


def _read_servers(path: Path) -> dict[str, dict[str, Any]]:
    data = _read_json(path)
    if data is None:
        return {}
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        raise WorkspaceError(f"{path} has no `mcpServers` object of servers")
    return {str(k): dict(v) for k, v in servers.items()}


def _digest(folder: Path) -> str:
    """A skill's content: its files' relative paths and bytes."""
    h = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(str(file.relative_to(folder)).encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()
