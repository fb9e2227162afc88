"""Whose claude: when the service runs as root, each session's claude runs as the owner of its workspace,
never as root.

The rule: `ROOT/<user>` belongs to the account that user's claude runs as. An admin may make it and give
it to an existing account; when the service makes it (a new user), it gives it a uid of its own, the
first from `first_uid` up that no account on this machine and no other user folder has, so users never
share an account and no app user can borrow a system account by its name (a user called `postgres`
does not run as postgres). A folder that root owns is refused: claude is never run as root. Each
account gets a HOME of its own under `ROOT/.homes/<uid>` (0700; `.homes` cannot be a user's name),
with the service's sign-in copied into its claude config at every start: the copy mirrors the service's
as it is then (one the account's claude changed is written anew, one the service no longer has is removed).

The files the service itself writes into a workspace (synced skills, attached documents) are handed
to the owner, and written without following links the workspace's owner may have planted."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path

from frobozz._accounts import hand_over
from frobozz.engine import copy_sign_in

from .exceptions import AgentError, WorkspaceError

HOMES = ".homes"


def closed_to_others(path: Path) -> Path | None:
    """The first folder on the way to `path` (itself included) that another account may not pass, or None."""
    path = path.resolve()
    for folder in reversed([path, *path.parents]):
        try:
            if not folder.stat().st_mode & 0o001:
                return folder
        except OSError:  # not there yet: said once it is made (each claude's HOME asks again)
            return None
    return None


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


class Owners:
    """Accounts for user folders; inactive (everything runs as the service) unless the service is root."""

    def __init__(self, root: Path, *, first_uid: int, active: bool | None = None) -> None:
        self.root = root
        self.first_uid = first_uid
        self.active = os.geteuid() == 0 if active is None else active

    def check_reachable(self) -> None:
        """AgentError when active and the root is under a folder other accounts cannot pass: there claude, run as
        a workspace's owner, cannot read its HOME (no settings, no sign-in: it retried for seconds, then went on
        as if not logged in) nor the workspace by its path. `serve agent` asks at start, each claude's HOME too."""
        if self.active and (closed := closed_to_others(self.root)) is not None:
            raise AgentError(
                f"the workspaces root {self.root} is out of reach of the accounts claude runs as: {closed} lets no "
                f"other account through (chmod o+x {closed}, or choose a root outside it)"
            )

    def for_new_user(self) -> tuple[int, int] | None:
        """The account a new user folder is given: a uid no account and no other user folder has."""
        if not self.active:
            return None
        taken = {entry.stat(follow_symlinks=False).st_uid for entry in os.scandir(self.root)}
        uid = self.first_uid
        while uid in taken or _has_account(uid):
            uid += 1
        return uid, uid

    def of(self, path: Path, spec: str) -> tuple[int, int] | None:
        """(uid, gid) that a workspace's claude runs as: its folder's owner. None when the service is not root."""
        if not self.active:
            return None
        stat = path.stat()
        if stat.st_uid == 0:
            raise WorkspaceError(
                f"workspace {spec} belongs to root, and claude never runs as root: give it (and its user folder) "
                f"to the account that user's claude should run as (chown -R ACCOUNT {path.parent})"
            )
        return stat.st_uid, stat.st_gid

    def home(self, uid: int, gid: int, env: Mapping[str, str]) -> dict[str, str]:
        """HOME and CLAUDE_CONFIG_DIR for an account: its own folder, with the service's sign-in copied in."""
        self.check_reachable()
        homes = self.root / HOMES
        homes.mkdir(mode=0o711, exist_ok=True)
        homes.chmod(0o711)  # (the umask applies to mkdir's mode: under 027, .homes was closed to the accounts)
        home = homes / str(uid)
        if home.is_symlink():
            raise WorkspaceError(f"{home} is a link; a HOME is a folder of its own")
        home.mkdir(mode=0o700, exist_ok=True)
        config = home / ".claude"
        if config.is_symlink():  # (the account's own claude may have made it one: root writes into it next)
            raise WorkspaceError(f"{config} is a link; a claude config folder is a folder of its own")
        config.mkdir(mode=0o700, exist_ok=True)
        try:
            copy_sign_in(env, config)  # the service's sign-in and settings as they are now (a copy never outlives them)
        except OSError as e:  # (made a link since it was looked at: it is opened without following one)
            raise WorkspaceError(f"the sign-in is not copied into {config}: {e}") from e
        hand_over(home, uid, gid)
        return {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}

    def hand_over(self, path: Path, owner: tuple[int, int] | None) -> None:
        """What the service wrote into a workspace, given to its owner."""
        if owner is not None and path.exists():
            hand_over(path, *owner)
