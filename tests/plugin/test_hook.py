"""The hook command as Claude Code runs it (a subprocess, JSON on stdin), against the real daemon it starts:
the empty namespace, recall once per session, and every failure letting the prompt through unchanged,
with one message saying why memory is off."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from frobozz.memory import MemoryService
from frobozz.plugin import PluginSettings, _hook, daemon_pid, stop_daemon
from tests.ports import free_port
from tests.waiting import eventually

from .conftest import frobozz, hook

pytestmark = pytest.mark.anyio
HOOK = Path(__file__).parents[2] / "frobozz" / "plugin" / "_hook.py"


def payload(project: Path, event: str, session: str = "s-1", **more: str) -> dict:
    return {"session_id": session, "cwd": str(project), "hook_event_name": event, "transcript_path": "", **more}


def config(settings: PluginSettings, **changes: object) -> None:
    """Change the installed plugin's configuration (what `frobozz plugin install` wrote)."""
    path = settings.plugin_dir / "frobozz-memory" / "frobozz.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_the_hook_imports_nothing_but_the_standard_library():
    imported = set()
    for node in ast.walk(ast.parse(HOOK.read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_an_empty_namespace_orients_with_the_time_alone_and_recalls_nothing(installed, plugin_settings, project):
    started = hook("SessionStart", payload(project, "SessionStart", source="startup"), installed, plugin_settings)
    context = started["hookSpecificOutput"]["additionalContext"]
    assert "# Orientation" in context and "Here and now" in context and "Memories" not in context
    assert (
        hook("UserPromptSubmit", payload(project, "UserPromptSubmit", prompt="hello"), installed, plugin_settings) == {}
    )
    assert daemon_pid(plugin_settings.socket)  # the first hook started it


async def test_recall_shows_a_memory_once_in_a_session_and_again_in_the_next(
    installed, plugin_settings, project, cortex_settings
):
    service = MemoryService(cortex_settings)
    try:
        await (await service.store()).store("The deploy key lives in the blue vault.", namespace="myproject")
    finally:
        await service.aclose()
    ask = payload(project, "UserPromptSubmit", prompt="Where does the deploy key live?")
    first = hook("UserPromptSubmit", ask, installed, plugin_settings)
    assert "blue vault" in first["hookSpecificOutput"]["additionalContext"]
    assert hook("UserPromptSubmit", ask, installed, plugin_settings) == {}
    other = hook("UserPromptSubmit", {**ask, "session_id": "s-2"}, installed, plugin_settings)
    assert "blue vault" in other["hookSpecificOutput"]["additionalContext"]


def test_a_daemon_that_cannot_start_lets_the_prompt_through_and_says_why_once(installed, plugin_settings, project):
    config(plugin_settings, command=[sys.executable, "-c", "pass"], limits={"UserPromptSubmit": 1.0})
    ask = payload(project, "UserPromptSubmit", prompt="hello")
    first = hook("UserPromptSubmit", ask, installed, plugin_settings)
    assert "hookSpecificOutput" not in first and "did not start" in first["systemMessage"]
    assert hook("UserPromptSubmit", ask, installed, plugin_settings) == {}  # said once
    config(plugin_settings, command=["/nonexistent/python"])
    assert (
        "could not start"
        in hook("UserPromptSubmit", {**ask, "session_id": "s-3"}, installed, plugin_settings)["systemMessage"]
    )


def test_a_database_that_is_down_lets_the_prompt_through_and_says_why_once(
    claude_home, cortex_settings, installed, plugin_settings, project
):
    port = free_port()
    env = {**installed, "FROBOZZ_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{port}/nothing"}
    ask = payload(project, "UserPromptSubmit", prompt="hello")
    first = hook("UserPromptSubmit", ask, env, plugin_settings)
    assert "hookSpecificOutput" not in first and "database cannot be reached" in first["systemMessage"]
    assert "nobody" not in first["systemMessage"]  # the database's address is not repeated
    assert hook("UserPromptSubmit", ask, env, plugin_settings) == {}


def test_a_daemon_slower_than_the_limit_lets_the_prompt_through(installed, plugin_settings, project):
    """A socket that takes the request and never answers: the hook gives up at its limit."""
    plugin_settings.socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    silent = socket.socket(socket.AF_UNIX)
    silent.bind(str(plugin_settings.socket))
    silent.listen()
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True).start()
    try:
        config(plugin_settings, limits={"UserPromptSubmit": 1.0})
        out = hook("UserPromptSubmit", payload(project, "UserPromptSubmit", prompt="hello"), installed, plugin_settings)
        assert "hookSpecificOutput" not in out and "slower than the hook's limit" in out["systemMessage"]
    finally:
        silent.close()
        for c in held:
            c.close()
        os.unlink(plugin_settings.socket)


def test_malformed_or_hostile_input_adds_nothing_and_says_why(installed, plugin_settings):
    for raw in [
        b"",
        b"not json",
        b"[1, 2]",
        json.dumps({"session_id": "../../etc"}).encode(),
        json.dumps({"session_id": "s-1", "prompt": "x" * 9_000_000}).encode(),  # over the 8 MB a hook reads
    ]:
        config(plugin_settings, limits={"UserPromptSubmit": 30.0})
        for mark in (plugin_settings.socket.parent / f"{plugin_settings.socket.stem}.off").glob("*"):
            mark.unlink()  # each says why again
        out = hook("UserPromptSubmit", raw, installed, plugin_settings)
        assert "hookSpecificOutput" not in out and "Frobozz memory is off" in out.get("systemMessage", ""), raw[:40]


def test_an_unreadable_configuration_says_to_install_again(installed, plugin_settings, project):
    (plugin_settings.plugin_dir / "frobozz-memory" / "frobozz.json").write_text("{broken")
    out = hook("UserPromptSubmit", payload(project, "UserPromptSubmit", prompt="hi"), installed, plugin_settings)
    assert "install" in out["systemMessage"]


async def test_a_daemon_killed_with_sigkill_is_replaced_by_the_next_hook_and_an_idle_one_ends_itself(
    installed, plugin_settings, project
):
    start = payload(project, "SessionStart", source="startup")
    assert hook("SessionStart", start, {**installed, "FROBOZZ_PLUGIN_IDLE": "3"}, plugin_settings)
    first = daemon_pid(plugin_settings.socket)
    os.kill(first, signal.SIGKILL)  # its socket is left behind
    with anyio.fail_after(30):
        await eventually(lambda: not daemon_pid(plugin_settings.socket), interval=0.02)
    assert plugin_settings.socket.exists()
    assert hook("SessionStart", start, {**installed, "FROBOZZ_PLUGIN_IDLE": "3"}, plugin_settings)
    second = daemon_pid(plugin_settings.socket)
    assert second and second != first
    with anyio.fail_after(60):  # no hook for three seconds: it ends, and takes its socket with it
        await eventually(lambda: not (daemon_pid(plugin_settings.socket) or plugin_settings.socket.exists()))


def test_the_mcp_relay_says_why_and_fails_when_the_daemon_cannot_start(installed, plugin_settings, project):
    """claude then shows the server as failed; the hooks go on letting prompts through."""
    config(plugin_settings, command=["/nonexistent/python"])
    script = plugin_settings.plugin_dir / "frobozz-memory" / "hooks" / "frobozz_hook.py"
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(script),
            "mcp",
            str(plugin_settings.plugin_dir / "frobozz-memory" / "frobozz.json"),
            "cortex",
        ],
        input=b"",
        env=installed,
        cwd=project,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1 and b"cortex server is not available" in done.stderr and not done.stdout


def test_with_memory_off_the_mcp_relay_starts_no_daemon_and_fails_at_once_saying_why(
    installed, plugin_settings, project
):
    """A claude Frobozz runs its own memory loop around (FROBOZZ_PLUGIN_OFF) gets none of the plugin's servers:
    claude lists the server as failed, and no daemon is started for it."""
    plugin = plugin_settings.plugin_dir / "frobozz-memory"
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(plugin / "hooks" / "frobozz_hook.py"),
            "mcp",
            str(plugin / "frobozz.json"),
            "cortex",
        ],
        input=b"",
        env={**installed, "FROBOZZ_PLUGIN_OFF": "1"},
        cwd=project,
        capture_output=True,
        timeout=30,
    )
    said = done.stderr.decode().splitlines()
    assert done.returncode == 1 and not done.stdout
    assert said == ["frobozz memory: the cortex server is off here (FROBOZZ_PLUGIN_OFF is set): no daemon started"]
    assert daemon_pid(plugin_settings.socket) is None and not plugin_settings.socket.exists()


async def test_the_mcp_relay_serves_cortex_and_handoff_from_the_daemon_in_the_projects_namespace_and_session(
    installed, plugin_settings, project, cortex_settings
):
    """claude tells its servers its session in CLAUDE_CODE_SESSION_ID: the relay passes it on, and the daemon's
    handoff signs letters with it, as cortex marks what it stores seen in it. The daemon serves every claude: its
    own environment's session is the one whose relay started it (letters of later sessions were signed so)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    script = plugin_settings.plugin_dir / "frobozz-memory" / "hooks" / "frobozz_hook.py"

    def relay(server: str, session: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            cwd=str(project),
            env={**installed, "CLAUDE_CODE_SESSION_ID": session},
            args=[
                "-I",
                "-S",
                str(script),
                "mcp",
                str(plugin_settings.plugin_dir / "frobozz-memory" / "frobozz.json"),
                server,
            ],
        )

    with anyio.fail_after(120):
        async with (
            stdio_client(relay("cortex", "the-first-claude")) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            assert "store" in {t.name for t in (await client.list_tools()).tools}
            stored = await client.call_tool("store", {"content": "The relay keeps this."})
            assert not stored.is_error
        async with (
            stdio_client(relay("handoff", "the-next-claude")) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            assert not (await client.call_tool("handoff", {"summary": "Where the relay left off."})).is_error
            latest = (await client.call_tool("latest_handoff", {})).structured_content["handoff"]
    assert daemon_pid(plugin_settings.socket)  # the relay started the daemon, which served the tools
    assert (latest["summary"], latest["namespace"], latest["session_id"]) == (
        "Where the relay left off.",
        "myproject",
        "the-next-claude",
    )
    service = MemoryService(cortex_settings)
    try:
        assert [m.content for m in await (await service.store()).recent(5, "myproject")] == ["The relay keeps this."]
    finally:
        await service.aclose()


def test_a_hub_address_with_a_port_that_is_not_one_says_so_and_how_to_put_it_right(installed, plugin_settings, project):
    """A frobozz.json written by hand or by an older install: `url.port` raised, and the hook said nothing."""
    for n, hub in enumerate(("http://127.0.0.1:99999", "http://127.0.0.1:port/")):
        config(plugin_settings, hub=hub)
        ask = payload(project, "UserPromptSubmit", session=f"s-{n}", prompt="hello")  # (each says why once)
        said = hook("UserPromptSubmit", ask, installed, plugin_settings).get("systemMessage", "")
        assert "Frobozz memory is off for now" in said and hub in said, said
        assert "frobozz plugin install --hub" in said


async def run_hook(event: str, payload: dict, env: dict[str, str], settings: PluginSettings) -> dict:
    """`hook`, cancellable: its process is killed when the test's time is up."""
    config_path = settings.plugin_dir / "frobozz-memory" / "frobozz.json"
    script = settings.plugin_dir / "frobozz-memory" / "hooks" / "frobozz_hook.py"
    done = await anyio.run_process(
        [sys.executable, "-I", "-S", str(script), event, str(config_path)], input=json.dumps(payload).encode(), env=env
    )
    return json.loads(done.stdout) if done.stdout.strip() else {}


async def test_a_daemon_that_exits_as_it_starts_is_not_waited_for_and_its_own_reason_is_said(
    installed, plugin_settings, project, tmp_path
):
    """Its socket's folder not private: the hook waited out its whole limit, then said the daemon did not start in
    time (the reason only in the daemon's log), and so did every later hook. Now the first says the daemon's reason
    and the next, for a while, say it without starting another."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    socket_path = shared / "memory.sock"
    path = plugin_settings.plugin_dir / "frobozz-memory" / "frobozz.json"
    command = json.loads(path.read_text())["command"]
    assert command[-2] == "--socket"
    config(plugin_settings, socket=str(socket_path), command=[*command[:-1], str(socket_path)])
    config(plugin_settings, limits={"UserPromptSubmit": 300.0})  # far beyond the time the test gives it
    config(plugin_settings, failed_for=3600.0)  # the second hook comes well within it, however loaded the machine
    reason = f"{shared} is not a private folder of this user's: remove it and try again"
    with anyio.fail_after(90):
        first = await run_hook("UserPromptSubmit", payload(project, "UserPromptSubmit"), installed, plugin_settings)
        assert "hookSpecificOutput" not in first and reason in first.get("systemMessage", ""), first
        ask = payload(project, "UserPromptSubmit", session="s-2")
        assert reason in (await run_hook("UserPromptSubmit", ask, installed, plugin_settings))["systemMessage"]
    assert plugin_settings.log.read_text().count(reason) == 1  # one daemon started, for the first hook only


async def test_status_says_why_and_when_the_daemon_last_failed_to_start_until_one_starts(
    installed, plugin_settings, project, tmp_path
):
    """`frobozz plugin status` said only "not running" when the hooks' daemon could not start: it says the reason the
    hook kept, and when, until a daemon starts again."""
    path = plugin_settings.plugin_dir / "frobozz-memory" / "frobozz.json"
    kept = json.loads(path.read_text())
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    socket_path = shared / "memory.sock"
    config(plugin_settings, socket=str(socket_path), command=[*kept["command"][:-1], str(socket_path)])
    reason = f"{shared} is not a private folder of this user's: remove it and try again"
    with anyio.fail_after(90):
        await run_hook("UserPromptSubmit", payload(project, "UserPromptSubmit"), installed, plugin_settings)
    said = frobozz("plugin", "status", env=installed, cwd=project).stdout
    failed = plugin_settings.log.with_suffix(".failed")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(failed.stat().st_mtime))
    assert "memory daemon: not running" in said
    assert f"last failed to start at {when}" in said and reason in said, said

    config(plugin_settings, socket=kept["socket"], command=kept["command"])
    os.utime(failed, (time.time() - 60, time.time() - 60))  # a minute ago: the hooks try again
    with anyio.fail_after(90):
        await run_hook(
            "UserPromptSubmit", payload(project, "UserPromptSubmit", session="s-2"), installed, plugin_settings
        )
    assert daemon_pid(plugin_settings.socket)
    stop_daemon(plugin_settings.socket)
    said = frobozz("plugin", "status", env=installed, cwd=project).stdout
    assert "memory daemon: not running" in said and "failed" not in said, said


async def test_a_memory_stored_through_the_relay_in_a_folder_named_with_a_leading_underscore_is_recalled_there(
    installed, plugin_settings, tmp_path
):
    """`_scratch` was taken as the namespace, which none may be (it starts with '_'): cortex refused to store,
    and the hooks' session was left out, with nothing said."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    project = tmp_path / "_scratch"
    project.mkdir()
    plugin = plugin_settings.plugin_dir / "frobozz-memory"
    cortex = StdioServerParameters(
        command=sys.executable,
        cwd=str(project),
        env={**installed, "CLAUDE_CODE_SESSION_ID": "s-1"},
        args=["-I", "-S", str(plugin / "hooks" / "frobozz_hook.py"), "mcp", str(plugin / "frobozz.json"), "cortex"],
    )
    with anyio.fail_after(120):
        async with stdio_client(cortex) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            stored = await client.call_tool("store", {"content": "The deploy key lives in the blue vault."})
            assert not stored.is_error, stored.content
    ask = payload(project, "UserPromptSubmit", session="s-2", prompt="Where does the deploy key live?")
    recalled = hook("UserPromptSubmit", ask, installed, plugin_settings)
    assert "blue vault" in recalled.get("hookSpecificOutput", {}).get("additionalContext", ""), recalled


@pytest.fixture
def bare_config(tmp_path: Path) -> Iterator[Path]:
    """A frobozz.json of a plugin whose daemon's command the test gives, its socket in a short folder of its own
    (nothing listens there) and its log holding an earlier daemon's last line: no database, no install."""
    sockets = Path(tempfile.mkdtemp(prefix="fz-hook-"))
    log = tmp_path / "logs" / "memory-daemon.log"
    log.parent.mkdir()
    log.write_text("memory daemon idle for 1800 s: stopping\n")
    path = tmp_path / "frobozz.json"
    path.write_text(
        json.dumps({"socket": str(sockets / "memory.sock"), "log": str(log), "limits": {"UserPromptSubmit": 120.0}})
    )
    yield path
    shutil.rmtree(sockets, ignore_errors=True)


def bare_hook(path: Path, session: str, **changes: object) -> dict:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return _hook.run("UserPromptSubmit", str(path), json.dumps({"session_id": session, "prompt": "hi"}).encode())


def test_a_daemon_that_exits_saying_nothing_is_not_given_an_earlier_daemons_last_line_as_its_reason(bare_config):
    """The log every daemon appends to: one killed, or crashing before it logged, was said to have failed with the
    line an earlier daemon ended with ("idle for 1800 s: stopping"), and `plugin status` repeated it."""
    silent = [sys.executable, "-c", "raise SystemExit(1)"]
    said = bare_hook(bare_config, "s-1", command=silent)["systemMessage"]
    log = json.loads(bare_config.read_text())["log"]
    assert "idle" not in said and f"exited (status 1) without saying why; see {log}" in said, said
    kept = (bare_config.parent / "logs" / "memory-daemon.failed").read_text()
    assert "idle" not in kept and "without saying why" in kept
    says = [sys.executable, "-c", "import sys; print('error: its own reason'); sys.exit(1)"]
    said = bare_hook(bare_config, "s-2", command=says, failed_for=0)["systemMessage"]
    assert "could not start: its own reason" in said, said


def test_a_daemons_failure_to_start_answers_the_next_hooks_for_the_configured_time(bare_config, tmp_path):
    """`failed_for` in frobozz.json (FROBOZZ_PLUGIN_FAILED_FOR when installed): within it the next hooks say the
    failure and start no daemon; with 0, each starts one again."""
    starts = tmp_path / "starts"
    command = [sys.executable, "-c", f"open({str(starts)!r}, 'a').write('x'); raise SystemExit(1)"]
    for session in ("s-1", "s-2", "s-3"):
        said = bare_hook(bare_config, session, command=command, failed_for=3600)["systemMessage"]
        assert "memory daemon" in said and "off for now" in said, said
    assert starts.read_text() == "x"
    assert "memory daemon" in bare_hook(bare_config, "s-4", failed_for=0)["systemMessage"]
    assert starts.read_text() == "xx"
