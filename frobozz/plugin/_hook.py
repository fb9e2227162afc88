"""The hook command Claude Code runs (copied into the plugin as `hooks/frobozz_hook.py`): standard library
only, so it starts in a few tens of milliseconds and loads no model and no database driver.

`python -I -S frobozz_hook.py EVENT CONFIG` reads the hook's JSON from stdin, hands it to the memory daemon
over its Unix socket (starting the daemon when none answers), and prints what the daemon adds as the
hook's additional context. Every failure (no daemon, a database that is down, a slow answer) lets the
prompt through unchanged, within the time limit, and says once per session why memory is off. A daemon that
exits as it starts (its socket's folder is not private, say) is not waited for: the hook says the daemon's own
reason (the last line it wrote to its log) and, for `failed_for` seconds (frobozz.json's, FAILED_FOR without one),
the next hooks answer with it and start none.
With nothing installed for its data directory (`frobozz plugin uninstall`, while a claude that loaded the plugin
is still open), it does nothing: no daemon started, nothing said."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

MAX_INPUT = 8 * 1024 * 1024  # bytes of hook input read; a bigger prompt goes without memory
MAX_REPLY = 4 * 1024 * 1024
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")
OFF_ENV = "FROBOZZ_PLUGIN_OFF"  # set for the daemon's own claude (the sidecar): its hooks and relay do nothing
FAILED_FOR = 10.0  # seconds a daemon's failure to start answers the next hooks, before one tries again (default)


class Off(Exception):
    """Memory is off for this hook: the reason, said once per session."""


def _connect(path: str, deadline: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(max(deadline - time.monotonic(), 0.01))
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def installed(config: dict[str, Any]) -> bool:
    """Whether an install of the plugin is recorded for the configuration's data directory (uninstalling the last
    one removes the record); a configuration that names no record (an older install's) is taken as installed."""
    record = config.get("installed")
    if not record:
        return True
    try:
        with open(record, encoding="utf-8") as f:
            return bool(json.load(f))
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # (unreadable: memory is tried, and says why it is off if it is)


def _start_daemon(config: dict[str, Any]) -> tuple[subprocess.Popen[bytes], int]:
    """The daemon, in a session of its own (it outlives this hook by design and ends itself when idle), and its
    log's size as it started (what it writes comes after: earlier daemons' lines come before); its output goes
    to its log, never to claude's terminal."""
    import subprocess  # only here: its import is a good part of a hook's start

    log = config["log"]
    os.makedirs(os.path.dirname(log), mode=0o700, exist_ok=True)
    with open(log, "ab") as out:
        start = os.fstat(out.fileno()).st_size
        daemon = subprocess.Popen(
            config["command"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, **config.get("env", {})},
        )
    return daemon, start


def _failures(config: dict[str, Any]) -> str:
    """Where the last failure of a daemon to start is kept (beside its log, in the data folder)."""
    return os.path.splitext(config["log"])[0] + ".failed"


def _failed(config: dict[str, Any], status: int, start: int) -> str:
    """Why the daemon that exited with `status` as it started did (the last line it wrote to its log, which it
    found `start` bytes long: the lines before are earlier daemons'), kept for the next hooks."""
    try:
        with open(config["log"], "rb") as f:
            f.seek(max(start, os.fstat(f.fileno()).st_size - 4096))
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    said = "".join(c for c in lines[-1] if c.isprintable()).removeprefix("error: ")[:300] if lines else ""
    why = (
        f"the memory daemon could not start: {said}"
        if said
        else f"the memory daemon exited (status {status}) without saying why; see {config['log']}"
    )
    try:
        with open(_failures(config), "w", encoding="utf-8") as f:
            f.write(why)
    except OSError:
        pass
    return why


def _failed_for(config: dict[str, Any]) -> float:
    """Seconds a daemon's failure to start answers the next hooks (frobozz.json's `failed_for`, else FAILED_FOR)."""
    try:
        seconds = float(config.get("failed_for", FAILED_FOR))
    except (TypeError, ValueError):
        return FAILED_FOR
    return seconds if seconds >= 0 else FAILED_FOR  # (negative, or nan: the default)


def _recent_failure(config: dict[str, Any]) -> str | None:
    """Why a daemon failed to start, when one did less than `_failed_for` seconds ago."""
    try:
        with open(_failures(config), encoding="utf-8") as f:
            if 0 <= time.time() - os.fstat(f.fileno()).st_mtime < _failed_for(config):
                return f.read(400) or None
    except (OSError, ValueError):
        pass
    return None


def _open(config: dict[str, Any], deadline: float) -> socket.socket:
    """A connection to the daemon, starting it once if none listens (unless one failed to start just now); a
    daemon that exits with an error as it starts is not waited for."""
    path, daemon, start = config["socket"], None, 0
    while True:
        try:
            return _connect(path, deadline)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            if daemon is None:
                if why := _recent_failure(config):
                    raise Off(why) from e
                try:
                    daemon, start = _start_daemon(config)
                except OSError as e2:
                    raise Off(f"the memory daemon could not start ({type(e2).__name__})") from e2
            elif daemon.poll():  # (0: it left the socket to another daemon, started at the same moment)
                raise Off(_failed(config, daemon.returncode, start)) from e
            if time.monotonic() >= deadline:
                raise Off("the memory daemon did not start in time") from e
            time.sleep(0.02)
        except (TimeoutError, OSError) as e:
            raise Off(f"the memory daemon cannot be reached ({type(e).__name__})") from e


def _ask_hub(hub: str, request: dict[str, Any], deadline: float) -> bytes:
    """The hub's answer (`POST /plugin/hook`, the hub's token from FROBOZZ_HUB_TOKEN in claude's environment)."""
    import http.client  # only with a hub: the daemon's hooks do without it
    from urllib.parse import urlsplit

    try:
        url = urlsplit(hub)
        port = url.port  # (a port that is not a number below 65536 is refused here)
    except ValueError as e:
        why = f"the plugin's hub address {hub[:200]} is not valid (run `frobozz plugin install --hub` again)"
        raise Off(why) from e
    if url.scheme not in ("http", "https") or not url.hostname:
        raise Off("the plugin's hub address is not an http(s) URL (run `frobozz plugin install --hub` again)")
    kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    connection = kind(url.hostname, port, timeout=max(deadline - time.monotonic(), 0.01))
    headers = {"Content-Type": "application/json"}
    if os.environ.get("FROBOZZ_HUB_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['FROBOZZ_HUB_TOKEN']}"
    try:
        connection.request("POST", url.path.rstrip("/") + "/plugin/hook", json.dumps(request), headers)
        response = connection.getresponse()
        body = response.read(MAX_REPLY + 1)
    except TimeoutError as e:
        raise Off("the hub was slower than the hook's limit") from e
    except (OSError, http.client.HTTPException) as e:
        raise Off(f"the hub cannot be reached ({type(e).__name__})") from e
    finally:
        connection.close()
    if response.status in (401, 403):
        raise Off("the hub refused the token (set FROBOZZ_HUB_TOKEN to the hub's, where claude runs)")
    if response.status != 200 or len(body) > MAX_REPLY:
        raise Off(f"the hub answered {response.status}")
    return body


def ask(config: dict[str, Any], request: dict[str, Any], deadline: float) -> dict[str, Any]:
    """The answer of the hub (when the plugin was installed with one) or of the daemon, to one request."""
    if config.get("hub"):
        return _reply(_ask_hub(str(config["hub"]), request, deadline))
    return _reply(_ask_daemon(config, request, deadline))


def _ask_daemon(config: dict[str, Any], request: dict[str, Any], deadline: float) -> bytes:
    with _open(config, deadline) as sock:
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
            chunks: list[bytes] = []
            size = 0
            while not chunks or not chunks[-1].endswith(b"\n"):
                sock.settimeout(max(deadline - time.monotonic(), 0.01))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_REPLY:
                    raise Off("the memory daemon's answer was too long")
        except TimeoutError as e:
            raise Off("the memory daemon was slower than the hook's limit") from e
        except OSError as e:
            raise Off(f"the memory daemon's connection failed ({type(e).__name__})") from e
    return b"".join(chunks)


def _reply(data: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(data)
    except ValueError as e:
        raise Off("memory's answer could not be read") from e
    if not isinstance(reply, dict):
        raise Off("memory's answer could not be read")
    if reply.get("error"):
        raise Off(str(reply["error"])[:300])
    return reply


def off_marks(socket_path: str | os.PathLike[str]) -> str:
    """Where the sessions already told that memory is off are marked (the daemon clears it when it stops)."""
    return os.path.splitext(os.fspath(socket_path))[0] + ".off"


def _say_once(config: dict[str, Any], session: str, why: str) -> dict[str, Any]:
    """A message for the user the first time memory is off in a session; nothing after that."""
    marks = off_marks(config["socket"])
    name = "".join(c for c in session if c.isalnum() or c in "-_")[:100] or "unknown"
    try:
        os.makedirs(marks, mode=0o700, exist_ok=True)
        os.close(os.open(os.path.join(marks, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return {}
    except OSError:
        pass
    return {"systemMessage": f"Frobozz memory is off for now: {why}. The prompt went through without it."}


def run(event: str, config_path: str, raw: bytes) -> dict[str, Any]:
    """The hook's JSON output (empty: nothing to add)."""
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {
            "systemMessage": "Frobozz memory is off: its plugin's configuration cannot be read "
            "(run `frobozz plugin install` again)."
        }
    if not installed(config):
        return {}
    try:
        payload = json.loads(raw) if len(raw) <= MAX_INPUT else None
    except ValueError:
        payload = None
    session = str(payload.get("session_id", "")) if isinstance(payload, dict) else ""
    limit = float(config.get("limits", {}).get(event, 2.0))
    try:
        if payload is None or not isinstance(payload, dict):
            raise Off("the hook's input could not be read")
        reply = ask(
            config, {"event": event, "input": payload, "namespace": config.get("namespace")}, time.monotonic() + limit
        )
    except Off as e:
        return _say_once(config, session, str(e))
    context = reply.get("context")
    if event in CONTEXT_EVENTS and isinstance(context, str) and context.strip():
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    return {}


def relay(config_path: str, server: str) -> int:
    """`frobozz_hook.py mcp CONFIG SERVER`: one of the plugin's MCP servers for claude, served by the daemon
    (started if need be): claude's stdin goes to the daemon's socket and the daemon's answers to stdout. With
    OFF_ENV set (a claude Frobozz runs its own memory loop around), it starts nothing and fails at once: claude
    lists the server as failed."""
    import threading

    if os.environ.get(OFF_ENV):
        sys.stderr.write(f"frobozz memory: the {server} server is off here ({OFF_ENV} is set): no daemon started\n")
        return 1
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        if not installed(config):
            raise Off("the plugin is not installed (`frobozz plugin install` installs it)")
        sock = _open(config, time.monotonic() + float(config.get("limits", {}).get("SessionStart", 10.0)))
    except (OSError, ValueError, Off) as e:
        sys.stderr.write(f"frobozz memory: the {server} server is not available: {e}\n")
        return 1
    sock.settimeout(None)
    sock.sendall(
        json.dumps(
            {
                "event": "mcp",
                "server": server,
                "namespace": config.get("namespace"),
                "project": os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd(),
                "session": os.environ.get("CLAUDE_CODE_SESSION_ID", ""),
            }
        ).encode()
        + b"\n"
    )

    def answers() -> None:  # the daemon's side ended: so does the server, for claude
        try:
            while chunk := sock.recv(65536):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(1, view) :]
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=answers, daemon=True).start()
    try:
        while chunk := os.read(0, 65536):
            sock.sendall(chunk)
        sock.shutdown(socket.SHUT_WR)  # claude closed stdin: the daemon ends the session and closes
    except OSError:
        return 0
    threading.Event().wait(10)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "mcp":
        return relay(argv[2], argv[3])
    if os.environ.get(OFF_ENV) or len(argv) != 3:
        return 0
    raw = sys.stdin.buffer.read(MAX_INPUT + 1)
    try:
        output = run(argv[1], argv[2], raw)
    except Exception:  # noqa: BLE001 - never block the user: the prompt goes on unchanged
        output = {}
    if output:
        sys.stdout.write(json.dumps(output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
