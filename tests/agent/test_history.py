"""A workspace that is a git repository keeps each turn's files as a commit (author the session's user, message
the turn's first line and the session), one commit at a time per workspace: two sessions writing at once for
20 turns each lose nothing and leave the repository sound."""

from __future__ import annotations

import os
import subprocess

import anyio
import pytest

from frobozz.agent import Done
from tests.agent.test_agent import turn

pytestmark = pytest.mark.anyio
TURNS = 20


def git(path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", f"safe.directory={path}", *args], cwd=path, check=True, capture_output=True, text=True
    ).stdout


def repository(path) -> None:
    """`git init` in the workspace, owned as the workspace is (its owner's claude and git write there)."""
    git(path, "init", "--quiet", "--initial-branch=main")
    owner = path.stat()
    for folder, dirs, files in os.walk(path / ".git"):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, owner.st_uid, owner.st_gid)


async def test_a_workspace_that_is_no_repository_has_no_changes_and_a_new_repository_none_yet(agent):
    session = await agent.create_session("alice/plain")
    assert await agent.changes(session) == []
    repository((await agent.session(session)).workspace.path)
    assert await agent.changes(session) == []


async def test_two_sessions_writing_at_once_for_twenty_turns_commit_every_change_and_git_stays_sound(agent):
    first = await agent.create_session("alice/shared")
    second = await agent.create_session("alice/shared")
    path = (await agent.session(first)).workspace.path
    repository(path)

    async def run(session: str, name: str) -> None:
        live = await agent.session(session)
        after = live.relay.last_seq
        for n in range(TURNS):
            await agent.post_message(live, f"write {name}-{n}.md: turn {n} of {name}")
        dones = 0
        with anyio.fail_after(600):
            async for logged in live.relay.follow(after):
                if isinstance(logged.event, Done):
                    dones += 1
                    if dones == TURNS:
                        return

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, first, "one")
        tg.start_soon(run, second, "two")
    for session, name in ((first, "one"), (second, "two")):
        commits = await agent.changes(session)
        assert len(commits) == TURNS
        assert sorted(c["files"][0] for c in commits) == sorted(f"{name}-{n}.md" for n in range(TURNS))
        assert all(c["author"] == "alice" and c["message"].startswith(f"write {name}-") for c in commits)
        assert (path / f"{name}-7.md").read_text() == f"turn 7 of {name}"
    assert int(git(path, "rev-list", "--count", "HEAD")) == 2 * TURNS
    assert git(path, "status", "--porcelain") == ""  # every change committed
    fsck = subprocess.run(
        ["git", "-c", f"safe.directory={path}", "fsck", "--strict"], cwd=path, capture_output=True, text=True
    )
    assert fsck.returncode == 0 and "error" not in fsck.stderr.lower()
    assert git(path, "log", "-1", "--format=%B", commits[0]["commit"]).strip().endswith(f"session: {second}")


async def test_files_a_bash_command_changed_made_or_removed_are_committed_with_the_turn_and_others_left_alone(agent):
    session = await agent.create_session("alice/scripts")
    path = (await agent.session(session)).workspace.path
    repository(path)
    for text in ("write kept.md: one", "write gone.md: two"):
        assert isinstance((await turn(agent, session, text))[-1], Done)
    (path / "untouched.md").write_text("not the turn's")  # changed before the turn: not the turn's to commit
    events = await turn(agent, session, "run printf three > by-bash.md && printf changed > kept.md && rm gone.md")
    assert isinstance(events[-1], Done) and not events[-1].is_error
    latest = (await agent.changes(session))[0]
    assert latest["message"].startswith("run printf three") and latest["author"] == "alice"
    assert sorted(latest["files"]) == ["by-bash.md", "gone.md", "kept.md"]
    assert git(path, "show", "HEAD:kept.md") == "changed" and git(path, "show", "HEAD:by-bash.md") == "three"
    assert git(path, "status", "--porcelain") == "?? untouched.md\n"  # the one changed outside the turn stays


async def test_a_same_size_rewrite_within_the_clocks_resolution_is_seen_as_a_change(tmp_path):
    """git's racy case: a file already changed is written again with the same size and, on a coarse clock, the
    same mtime (set back here, as such a clock would leave it). Its content's hash tells; a file left alone, or
    one last written long ago, is not taken for changed."""
    from frobozz.agent._history import changed, dirty
    from frobozz.agent._workspaces import Workspace

    path = tmp_path / "alice" / "notes"
    path.mkdir(parents=True)
    space = Workspace(user="alice", name="notes", path=path, user_dir=path.parent)
    assert await dirty(space) == {}  # no repository: nothing
    repository(path)
    assert await dirty(space) == {}  # the empty case: a repository with nothing in it
    for name in ("kept.md", "old.md"):
        (path / name).write_text("aaaa")
    git(path, "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "--quiet", "-m", "first")
    (path / "kept.md").write_text("bbbb")  # changed since the commit
    (path / "old.md").write_text("cccc")
    os.utime(path / "old.md", ns=(0, (path / "old.md").stat().st_mtime_ns - 3600 * 10**9))  # an hour ago
    (path / "alone.md").write_text("untracked, left alone")
    before = await dirty(space)
    assert sorted(before) == ["alone.md", "kept.md", "old.md"]
    stamp = (path / "kept.md").stat().st_mtime_ns
    (path / "kept.md").write_text("dddd")  # the same size ...
    os.utime(path / "kept.md", ns=(stamp, stamp))  # ... and the same mtime
    after = await dirty(space, before)
    assert after["kept.md"][:2] == before["kept.md"][:2]  # size and mtime alone would have missed it
    assert changed(before, after) == ["kept.md"]
    (path / "old.md").unlink()
    assert changed(after, await dirty(space, after)) == ["old.md"]  # gone: changed too
