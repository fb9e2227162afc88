"""`frobozz plugin install/uninstall/status` through claude's own plugin commands, in a fresh HOME: the user's
settings byte for byte as before after uninstall, other plugins and hooks kept; project scope apart; uninstall
takes the install's memory daemon with it, and nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from frobozz.engine import find_claude
from frobozz.plugin import (
    PLUGIN_ID,
    PluginError,
    PluginSettings,
    _hook,
    daemon_pid,
    install,
    status,
    stop_daemon,
    uninstall,
)

from .conftest import clone_install, frobozz, hook, hook_env, installed_files

OTHER_HOOKS = {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}


def other_plugin(home: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """Someone else's plugin, installed through claude before ours."""
    market = tmp_path / "other-market"
    (market / ".claude-plugin").mkdir(parents=True)
    (market / "p" / ".claude-plugin").mkdir(parents=True)
    (market / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps({"name": "other", "owner": {"name": "x"}, "plugins": [{"name": "theirs", "source": "./p"}]})
    )
    (market / "p" / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "theirs", "version": "1.0.0"}))
    for args in (["marketplace", "add", str(market)], ["install", "theirs@other"]):
        done = subprocess.run(
            [str(find_claude()), "plugin", *args], env=env, capture_output=True, text=True, timeout=120, cwd=home
        )
        assert done.returncode == 0, done.stderr


def test_status_says_nothing_is_installed_at_first(claude_home, cortex_settings, project):
    done = frobozz("plugin", "status", env=hook_env(claude_home, cortex_settings), cwd=project)
    assert done.returncode == 0 and "not installed" in done.stdout and "not running" in done.stdout


def test_uninstall_leaves_the_users_settings_byte_for_byte_with_other_plugins_and_hooks(
    claude_home, cortex_settings, project, tmp_path, plugin_settings
):
    env = hook_env(claude_home, cortex_settings)
    other_plugin(claude_home, tmp_path, env)
    settings = claude_home / ".claude" / "settings.json"
    mine = json.loads(settings.read_text())
    settings.write_text(json.dumps({"model": "opus", **mine, "hooks": OTHER_HOOKS}, indent="\t") + "\n\n")
    before = settings.read_bytes()

    done = frobozz("plugin", "install", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    during = json.loads(settings.read_text())
    assert during["enabledPlugins"] == {"theirs@other": True, "frobozz-memory@frobozz-local": True}
    assert during["hooks"] == OTHER_HOOKS
    status = frobozz("plugin", "status", env=env, cwd=project).stdout
    assert "user scope" in status and "per project" in status
    hooks = json.loads((plugin_settings.plugin_dir / "frobozz-memory" / "hooks" / "hooks.json").read_text())
    assert set(hooks["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Stop",
        "PreCompact",
        "SessionEnd",
    }

    assert frobozz("plugin", "install", env=env, cwd=project).returncode == 0  # again: still one install
    done = frobozz("plugin", "uninstall", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert settings.read_bytes() == before
    listed = subprocess.run(
        [str(find_claude()), "plugin", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=project,
    )
    assert [p["id"] for p in json.loads(listed.stdout)] == ["theirs@other"]
    assert "not installed" in frobozz("plugin", "status", env=env, cwd=project).stdout


# what differs between two installs at the same paths: when, and claude's ids for its HOME
VOLATILE = {"installedAt", "lastUpdated", "firstStartTime", "machineID", "userID"}


def without_volatile(value):
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    return [without_volatile(v) for v in value] if isinstance(value, list) else value


def same_install(made: Path, copied: Path) -> None:
    assert installed_files(made) == installed_files(copied) != []
    for name in installed_files(made):
        ours, theirs = (made / name).read_text(), (copied / name).read_text()
        if name.suffix == ".json":
            ours, theirs = without_volatile(json.loads(ours)), without_volatile(json.loads(theirs))
        assert ours == theirs, name
        assert (made / name).stat().st_mode == (copied / name).stat().st_mode, name


def test_a_user_without_settings_has_none_again_after_uninstall(
    claude_home, cortex_settings, project, tmp_path, install_template
):
    env = hook_env(claude_home, cortex_settings)
    settings = claude_home / ".claude" / "settings.json"
    assert not settings.exists()
    assert frobozz("plugin", "install", env=env, cwd=project).returncode == 0
    assert settings.exists()
    # the other plugin tests' install is a copy of one made once (conftest's `installed`): it is this one
    clone_install(install_template, tmp_path, into=tmp_path / "copy")
    same_install(tmp_path, tmp_path / "copy")
    assert frobozz("plugin", "uninstall", env=env, cwd=project).returncode == 0
    assert not settings.exists()


def test_project_scope_writes_the_projects_settings_and_leaves_the_users_alone(claude_home, cortex_settings, project):
    env = hook_env(claude_home, cortex_settings)
    done = frobozz("plugin", "install", "--scope", "project", "--namespace", "work", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    assert (
        "frobozz-memory@frobozz-local"
        in json.loads((project / ".claude" / "settings.json").read_text())["enabledPlugins"]
    )
    assert (
        not (claude_home / ".claude" / "settings.json").exists()
        or "frobozz" not in (claude_home / ".claude" / "settings.json").read_text()
    )
    assert "namespace: work" in frobozz("plugin", "status", env=env, cwd=project).stdout
    assert frobozz("plugin", "uninstall", "--scope", "project", env=env, cwd=project).returncode == 0
    assert not (project / ".claude").exists()  # the folder install made goes with it: the project as it was


def test_bad_arguments_are_refused_and_change_nothing(claude_home, cortex_settings, project):
    env = hook_env(claude_home, cortex_settings)
    for args in (
        ["install", "--scope", "galaxy"],
        ["install", "--namespace", " "],
        ["install", "--namespace", "../x"],  # (taken before: every session then said its memory was off)
        ["uninstall"],
    ):
        done = frobozz("plugin", *args, env=env, cwd=project)
        assert done.returncode != 0 and "error" in done.stderr, args
    assert not (claude_home / ".claude" / "settings.json").exists()
    assert not (project / ".claude").exists()


def test_a_settings_file_that_is_json_but_not_an_object_is_refused_by_name_and_left_byte_for_byte(
    claude_home, cortex_settings, project, plugin_settings
):
    env = hook_env(claude_home, cortex_settings)
    user, theirs = claude_home / ".claude" / "settings.json", project / ".claude" / "settings.json"
    for target, content, args in ((user, b"[1,2]", []), (theirs, b' "x"\n', ["--scope", "project"])):
        target.parent.mkdir()
        target.write_bytes(content)
        done = frobozz("plugin", "install", *args, env=env, cwd=project)
        assert done.returncode == 1 and str(target) in done.stderr and "not an object" in done.stderr, done.stderr
        assert target.read_bytes() == content and os.listdir(target.parent) == ["settings.json"]
    assert not plugin_settings.plugin_dir.exists()  # nothing written for claude to find either
    assert "not installed" in frobozz("plugin", "status", env=env, cwd=project).stdout
    assert not (claude_home / ".claude.json").exists() or "frobozz" not in (claude_home / ".claude.json").read_text()


def session_start(project: Path) -> dict:
    return {"session_id": "s-1", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}


def test_uninstall_stops_the_memory_daemon_of_its_install_and_says_so(installed, plugin_settings, project):
    assert hook("SessionStart", session_start(project), installed, plugin_settings)
    pid = daemon_pid(plugin_settings.socket)
    assert pid
    done = frobozz("plugin", "uninstall", env=installed, cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"stopped its memory daemon (pid {pid})" in done.stdout
    assert daemon_pid(plugin_settings.socket) is None and not plugin_settings.socket.exists()


def test_uninstall_without_a_running_daemon_says_nothing_of_one(installed, plugin_settings, project):
    done = frobozz("plugin", "uninstall", env=installed, cwd=project)
    assert done.returncode == 0, done.stderr
    assert "uninstalled frobozz-memory" in done.stdout and "daemon" not in done.stdout


def test_uninstall_leaves_another_installs_memory_daemon_running(
    installed, plugin_settings, project, install_template, tmp_path
):
    """Another data directory (another install) has a daemon of its own, on its own socket."""
    other = PluginSettings(data_dir=tmp_path / "other" / "data")
    clone_install(install_template, tmp_path / "other")
    try:
        assert hook("SessionStart", session_start(project), installed, other)
        assert hook("SessionStart", session_start(project), installed, plugin_settings)
        theirs, ours = daemon_pid(other.socket), daemon_pid(plugin_settings.socket)
        assert theirs and ours and theirs != ours
        done = frobozz("plugin", "uninstall", env=installed, cwd=project)
        assert done.returncode == 0, done.stderr
        assert f"stopped its memory daemon (pid {ours})" in done.stdout
        assert daemon_pid(plugin_settings.socket) is None
        assert daemon_pid(other.socket) == theirs and other.socket.exists()
    finally:
        stop_daemon(other.socket)


def test_uninstall_kills_a_wedged_memory_daemon_after_a_bounded_wait(installed, plugin_settings, project):
    assert hook("SessionStart", session_start(project), installed, plugin_settings)
    pid = daemon_pid(plugin_settings.socket)
    assert pid
    os.kill(pid, signal.SIGSTOP)  # SIGTERM now waits forever: only SIGKILL ends it
    done = frobozz("plugin", "uninstall", env={**installed, "FROBOZZ_PLUGIN_STOP_WAIT": "1"}, cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"stopped its memory daemon (pid {pid})" in done.stdout
    assert daemon_pid(plugin_settings.socket) is None and not plugin_settings.socket.exists()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="a process's command line is read from /proc")
def test_uninstall_never_signals_a_process_that_is_not_the_installs_daemon(installed, plugin_settings, project):
    """A process that is no memory daemon holds the daemon's lock (its pid in the lock file): it is not signalled."""
    lock_file = plugin_settings.socket.with_suffix(".lock")
    lock_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    holder = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(lock_file)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, str(os.getpid()).encode())\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    other = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline() == "ready\n"
        done = frobozz("plugin", "uninstall", env=installed, cwd=project)
        assert done.returncode == 0, done.stderr
        assert "daemon" not in done.stdout
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def claude_plugin(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """claude's own plugin command, in the test's HOME."""
    return subprocess.run(
        [str(find_claude()), "plugin", *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def test_a_failed_install_records_nothing_and_a_later_one_still_puts_the_settings_back_byte_for_byte(
    claude_home, project, plugin_settings, monkeypatch
):
    """claude cannot read the user's settings: `install` used to record the plugin as installed all the same (the
    broken file as the one to put back), and every uninstall then failed and could no longer restore the file."""
    monkeypatch.setenv("HOME", str(claude_home))
    claude = str(find_claude())
    settings = claude_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = b'{ "model": "x", // a comment claude cannot read\n }\n'
    settings.write_bytes(broken)
    with pytest.raises(PluginError, match="marketplace add"):
        install(plugin_settings, "user", project, None, claude)
    assert settings.read_bytes() == broken and status(plugin_settings) == []
    listed = json.loads(claude_plugin("marketplace", "list", "--json", cwd=project).stdout)
    assert "frobozz-local" not in [m["name"] for m in listed]  # what claude recorded of the failed add, taken out
    with pytest.raises(PluginError, match="not installed"):
        uninstall(plugin_settings, "user", project, claude)

    fixed = '{\n    "model": "x",\n    "note": "h\u00e9llo \u2713"\n}\n'.encode()  # put right by hand
    settings.write_bytes(fixed)
    install(plugin_settings, "user", project, None, claude)
    assert PLUGIN_ID in json.loads(settings.read_text())["enabledPlugins"]
    uninstall(plugin_settings, "user", project, claude)
    assert settings.read_bytes() == fixed and status(plugin_settings) == []


def test_uninstall_of_a_plugin_claude_no_longer_has_forgets_it_and_puts_the_settings_back(
    claude_home, project, plugin_settings, install_template, tmp_path, monkeypatch
):
    """The user took the plugin out through claude itself: `frobozz plugin uninstall` failed every time (claude:
    not found in installed plugins), and the record said it was installed."""
    monkeypatch.setenv("HOME", str(claude_home))
    clone_install(install_template, tmp_path)
    assert claude_plugin("uninstall", PLUGIN_ID, "--scope", "user", cwd=project).returncode == 0
    settings = claude_home / ".claude" / "settings.json"
    assert json.loads(settings.read_text())["enabledPlugins"] == {}  # what claude leaves behind

    done = uninstall(plugin_settings, "user", project, str(find_claude()))
    assert done.settings == settings and status(plugin_settings) == []
    assert not settings.exists()  # there was none before the install


def test_uninstall_of_a_record_an_earlier_version_left_after_a_failed_install_forgets_it_and_removes_what_claude_added(
    claude_home, project, plugin_settings, monkeypatch
):
    """The record of an install claude never made, its settings file to put back one claude could not read; the
    user has put the file right since, and claude left its empty keys in it."""
    monkeypatch.setenv("HOME", str(claude_home))
    settings = claude_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps({"model": "x", "note": "h\u00e9llo \u2713", "enabledPlugins": {}, "extraKnownMarketplaces": {}})
    )
    plugin_settings.plugin_dir.mkdir(parents=True)
    (plugin_settings.plugin_dir / "installed.json").write_text(
        json.dumps(
            {
                str(settings): {
                    "scope": "user",
                    "original": '{ "model": "x", // comment\n }\n',
                    "project": str(project),
                    "folder_existed": True,
                    "namespace": None,
                    "hub": None,
                }
            }
        )
    )
    uninstall(plugin_settings, "user", project, str(find_claude()))
    assert status(plugin_settings) == []
    assert settings.read_text(encoding="utf-8") == '{\n  "model": "x",\n  "note": "h\u00e9llo \u2713"\n}\n'


def test_uninstall_keeps_what_the_user_changed_meanwhile_with_its_non_ascii_text_as_written(
    claude_home, project, plugin_settings, install_template, tmp_path, monkeypatch
):
    """A note, "héllo ✓", came back as "h\\u00e9llo \\u2713": written with JSON escapes."""
    monkeypatch.setenv("HOME", str(claude_home))
    clone_install(install_template, tmp_path)
    settings = claude_home / ".claude" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "note": "h\u00e9llo \u2713"}))
    uninstall(plugin_settings, "user", project, str(find_claude()))
    assert settings.read_text(encoding="utf-8") == '{\n  "note": "h\u00e9llo \u2713"\n}\n'


def test_after_uninstall_the_hooks_of_a_claude_still_open_do_nothing_and_start_no_daemon(
    claude_home, project, plugin_settings, install_template, tmp_path, monkeypatch
):
    """A claude session opened before the uninstall keeps calling the plugin's hooks (claude keeps its copy of
    the plugin): each started the memory daemon again, which then ran with nothing installed."""
    monkeypatch.setenv("HOME", str(claude_home))
    clone_install(install_template, tmp_path)
    copy = next((claude_home / ".claude" / "plugins" / "cache").rglob("frobozz.json"))  # what claude runs
    started: list[object] = []

    def start_daemon(config: dict) -> None:
        started.append(config)
        raise OSError("no daemon in this test")

    monkeypatch.setattr(_hook, "_start_daemon", start_daemon)
    ask = json.dumps({"session_id": "s-1", "cwd": str(project), "prompt": "hello"}).encode()
    assert "could not start" in _hook.run("UserPromptSubmit", str(copy), ask)["systemMessage"]  # installed: tried
    started.clear()

    uninstall(plugin_settings, "user", project, str(find_claude()))
    assert copy.exists()
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        assert _hook.run(event, str(copy), ask) == {}, event
    assert _hook.relay(str(copy), "cortex") == 1
    assert started == [] and daemon_pid(plugin_settings.socket) is None


def test_the_plugin_is_written_with_how_long_a_daemons_failure_to_start_answers_the_hooks(tmp_path, monkeypatch):
    """FROBOZZ_PLUGIN_FAILED_FOR, read by the hooks from frobozz.json (they import no settings)."""
    from frobozz.plugin._install import write_plugin

    written = tmp_path / "data" / "claude-plugin" / "frobozz-memory" / "frobozz.json"
    monkeypatch.setenv("FROBOZZ_PLUGIN_FAILED_FOR", "42")
    write_plugin(PluginSettings(data_dir=tmp_path / "data"), None)
    assert json.loads(written.read_text())["failed_for"] == 42.0
    write_plugin(PluginSettings(data_dir=tmp_path / "data", plugin_failed_for=0), None)
    assert json.loads(written.read_text())["failed_for"] == 0.0
