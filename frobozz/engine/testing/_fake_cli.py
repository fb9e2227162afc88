"""A fake claude for unit tests: speaks just enough stream-json to exercise the engine's edges
(garbage lines, oversized lines, dying mid-turn) that the real CLI cannot be made to produce.

Give `fake_cli_path()` (an executable that runs this module) as the engine's `cli_path`. Each user
message's text is a command: `echo X` answers X; `garbage` prints a non-JSON line first; `huge N` prints
an N-byte line first; `die` exits with code 3.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any


def _out(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    session = next((sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--resume"), None) or str(uuid.uuid4())
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") == "control_request":
            _out(
                {
                    "type": "control_response",
                    "response": {"subtype": "success", "request_id": msg["request_id"], "response": {"commands": []}},
                }
            )
            continue
        content = msg["message"]["content"]
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
        _out(
            {
                "type": "system",
                "subtype": "init",
                "session_id": session,
                "tools": [],
                "mcp_servers": [],
                "model": "fake",
                "cwd": os.getcwd(),
            }
        )
        verb, _, rest = text.partition(" ")
        if verb == "garbage":
            sys.stdout.write("this is not json {\n")
        elif verb == "huge":
            sys.stdout.write("x" * int(rest) + "\n")
        elif verb == "die":
            sys.stdout.flush()
            sys.stderr.write("fake claude: dying as asked\n")
            sys.stderr.flush()
            os._exit(3)
        reply = rest if verb == "echo" else f"you said: {text}"
        _out(
            {
                "type": "assistant",
                "session_id": session,
                "message": {
                    "id": "m",
                    "model": "fake",
                    "role": "assistant",
                    "content": [{"type": "text", "text": reply}],
                },
            }
        )
        _out(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": reply,
                "session_id": session,
                "num_turns": 1,
                "duration_ms": 1,
                "total_cost_usd": 0.0,
                "usage": {},
            }
        )


def fake_cli_path() -> str:
    """An executable file that runs this module with the current Python."""
    path = Path(tempfile.gettempdir()) / f"frobozz-fake-claude-{os.getuid()}"
    script = f'#!/bin/sh\nexec {sys.executable} -m frobozz.engine.testing._fake_cli "$@"\n'
    if not path.exists() or path.read_text() != script:
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(script)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        tmp.replace(path)
    return str(path)


if __name__ == "__main__":
    main()
