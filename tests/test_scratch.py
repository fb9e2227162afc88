"""Scratch folders outlive no crash: one whose maker was killed is removed by the next one made."""

import contextlib
import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from frobozz import _scratch
from frobozz._scratch import ScratchFolder, sweep_orphans

MAKER = """
import sys, time
from frobozz._scratch import ScratchFolder

folder = ScratchFolder(sys.argv[1])
(folder.path / "zork1.qzl").write_bytes(b"a story's own save")
print(folder.path, flush=True)
time.sleep(120)
"""


@pytest.fixture
def prefix():
    """A prefix no other test (or worker) sweeps."""
    name = f"frobozz-test-{uuid.uuid4().hex[:8]}-"
    yield name
    sweep_orphans(name)


def made_elsewhere(prefix: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-c", MAKER, prefix], stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def test_with_no_scratch_folders_a_sweep_removes_nothing(prefix):
    assert sweep_orphans(prefix) == []


def test_a_folder_is_private_and_remove_takes_it_with_what_was_written_in_it(prefix):
    folder = ScratchFolder(prefix)
    assert folder.path.name.startswith(prefix) and folder.path.stat().st_mode & 0o777 == 0o700
    (folder.path / "zork1.qzl").write_bytes(b"save")
    folder.remove()
    folder.remove()  # twice is harmless
    assert not folder.path.exists()


def test_a_folder_dropped_without_remove_goes_with_its_object_as_a_temporary_directory_does(prefix):
    folder = ScratchFolder(prefix)
    path = folder.path
    del folder
    gc.collect()
    assert not path.exists()


def test_a_folder_whose_maker_was_killed_is_removed_by_the_next_one_made(prefix):
    process, orphan = made_elsewhere(prefix)
    process.kill()  # SIGKILL: no clean-up of its own
    process.wait()
    assert os.path.isdir(orphan)
    fresh = ScratchFolder(prefix)
    try:
        assert not os.path.exists(orphan) and fresh.path.is_dir()
    finally:
        fresh.remove()
    process.stdout.close()


def test_a_folder_whose_maker_lives_is_left_alone_and_so_is_one_still_being_made(prefix):
    process, living = made_elsewhere(prefix)
    try:
        unlocked = os.path.join(os.path.dirname(living), f"{prefix}half-made")
        os.mkdir(unlocked)  # made, its lock not yet taken: a sweep must not take it
        assert sweep_orphans(prefix) == []
        assert sorted(os.listdir(living)) == [".owner", "zork1.qzl"]
        assert os.path.isdir(unlocked)
        os.rmdir(unlocked)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
    assert [str(p) for p in sweep_orphans(prefix)] == [living]


def test_a_symlink_or_a_file_under_the_prefix_is_never_followed_or_removed(prefix, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / ".owner").write_text("")  # unlocked: it would look like an orphan
    base = tempfile.gettempdir()
    symlink, plain = os.path.join(base, f"{prefix}link"), os.path.join(base, f"{prefix}file")
    os.symlink(target, symlink)
    open(plain, "w").close()
    try:
        assert sweep_orphans(prefix) == []
        assert (target / ".owner").exists() and os.path.islink(symlink) and os.path.isfile(plain)
    finally:
        os.unlink(symlink)
        os.unlink(plain)


def orphan(prefix: str, name: str) -> str:
    """A folder as a killed maker leaves it: its lock file there, nobody holding it."""
    folder = os.path.join(tempfile.gettempdir(), f"{prefix}{name}")
    os.mkdir(folder, 0o700)
    open(os.path.join(folder, ".owner"), "w").close()
    return folder


def test_remove_lets_go_of_the_lock_it_held(prefix):
    before = len(os.listdir("/proc/self/fd"))
    folder = ScratchFolder(prefix)
    assert len(os.listdir("/proc/self/fd")) == before + 1
    folder.remove()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_lock_file_that_is_a_fifo_is_passed_over_without_waiting_for_a_writer(prefix):
    folder = os.path.join(tempfile.gettempdir(), f"{prefix}fifo")
    os.mkdir(folder, 0o700)
    os.mkfifo(os.path.join(folder, ".owner"))
    with ThreadPoolExecutor(1) as pool:
        sweeping = pool.submit(sweep_orphans, prefix)
        try:
            assert sweeping.result(timeout=30) == []  # it opened the FIFO for reading: it would wait for ever
        finally:  # a sweep still waiting gets its writer (ENXIO when no one reads: then none waits)
            with contextlib.suppress(OSError):
                os.close(os.open(os.path.join(folder, ".owner"), os.O_WRONLY | os.O_NONBLOCK))
    assert os.path.isdir(folder)
    shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another account")
def test_root_leaves_an_orphan_whose_lock_file_is_another_accounts(prefix):
    """A workspace's account owns its session's config folder, and could swap the lock file for one nobody
    holds: root takes only folders whose lock file is root's."""
    theirs = orphan(prefix, "theirs")
    os.chown(os.path.join(theirs, ".owner"), 65534, 65534)
    ours = orphan(prefix, "ours")
    assert [str(p) for p in sweep_orphans(prefix)] == [ours]
    shutil.rmtree(theirs)


def too_deep(path, *args, **kwargs):
    """rmtree on a tree deeper than its recursion goes (Python 3.11): what it reached first is gone, then it fails."""
    for name in os.listdir(path):
        if not os.path.isdir(os.path.join(path, name)):
            os.unlink(os.path.join(path, name))
    raise RecursionError("maximum recursion depth exceeded")


def test_a_folder_that_cannot_be_emptied_is_passed_over_kept_for_the_next_sweep_and_a_new_folder_is_made(
    prefix, monkeypatch, caplog
):
    """rmtree raises RecursionError on a tree 1000 deep (Python 3.11): another's debris stops nothing, and the
    lock file, removed last, stays, so the folder is still an orphan a later sweep takes."""
    stuck = orphan(prefix, "stuck")
    os.mkdir(os.path.join(stuck, "deep"))

    with monkeypatch.context() as patched:
        patched.setattr(_scratch.shutil, "rmtree", too_deep)
        fresh = ScratchFolder(prefix)
        assert sorted(os.listdir(stuck)) == [".owner", "deep"] and "could not remove" in caplog.text
        fresh.remove()
    assert [str(p) for p in sweep_orphans(prefix)] == [stuck]


def test_remove_never_raises_and_lets_go_of_its_lock_when_its_folder_cannot_be_removed(prefix, monkeypatch, caplog):
    folder = ScratchFolder(prefix)
    (folder.path / "deep").mkdir()
    before = len(os.listdir("/proc/self/fd"))

    with monkeypatch.context() as patched:
        patched.setattr(_scratch.shutil, "rmtree", too_deep)
        folder.remove()  # (an engine's close goes on after it)
    assert len(os.listdir("/proc/self/fd")) == before - 1 and "could not remove" in caplog.text
    assert sweep_orphans(prefix) == [folder.path]  # an orphan now: the next sweep takes it
