"""Accounts a child runs as (a leaf module that imports nothing of Frobozz).

A service that runs as root starts claude as another account: a name or an id, resolved here once
with a clear error (subprocess would raise a bare KeyError), and the files root made for that
child handed over to it, without following links (a link made by the account is never a way for
root to change something elsewhere)."""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Collection
from pathlib import Path


class AccountError(ValueError):
    """No such user or group on this machine."""


def account(user: str | int | None, group: str | int | None = None) -> tuple[int | None, int | None]:
    """(uid, gid) for `user` and `group`; the group defaults to the user's primary group (or the uid's
    number, for an id with no entry in the passwd database). (None, None) with no user."""
    if user is None:
        if group is not None:
            raise AccountError("a group is given only with a user")
        return None, None
    uid, primary = _user(user)
    return uid, _group(group) if group is not None else primary


def _user(user: str | int) -> tuple[int, int]:
    if isinstance(user, bool) or (isinstance(user, int) and not 0 <= user < 2**32):
        raise AccountError(f"not a user id: {user!r}")
    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    except KeyError:
        if isinstance(user, int):
            return user, user
        raise AccountError(f"no user {user!r:.80} on this machine") from None
    return entry.pw_uid, entry.pw_gid


def _group(group: str | int) -> int:
    if isinstance(group, int) and not isinstance(group, bool):
        if not 0 <= group < 2**32:
            raise AccountError(f"not a group id: {group!r}")
        return group
    try:
        return grp.getgrnam(str(group)).gr_gid
    except KeyError:
        raise AccountError(f"no group {group!r:.80} on this machine") from None


def hand_over(path: Path, uid: int, gid: int | None, *, keep: Collection[Path] = ()) -> None:
    """Give `path` and everything under it to uid:gid, but for the files in `keep`; links are changed
    themselves, never followed. A file that goes while this runs is passed over: claude, running in a HOME
    being handed over, makes and removes its own (`.claude.json.lock`)."""
    gid = -1 if gid is None else gid
    os.chown(path, uid, gid, follow_symlinks=False)
    kept = {(info.st_dev, info.st_ino) for info in map(os.lstat, keep)}  # the files themselves, however named
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                entry = os.path.join(folder, name)
                try:
                    if kept and ((info := os.lstat(entry)).st_dev, info.st_ino) in kept:
                        continue
                    os.chown(entry, uid, gid, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone since the folder was listed
