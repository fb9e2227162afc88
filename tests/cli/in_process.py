"""`frobozz ARGS` in the test's own process (typer's runner): the same parsing, code, output and exit code as
the command, for the many calls of a test whose point is not the process (each process paid a Python start and
the CLI's imports: about 1 s of CPU, 5 s on a busy machine). A test that uses it keeps a real process too."""

from __future__ import annotations

import pytest


def frobozz_here(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, *args: str, code: int | None = 0):
    """The command's result (`stdout`, `stderr`, `exit_code`), its exit code checked against `code` (None: any)."""
    from typer.testing import CliRunner

    from frobozz.cli import app
    from frobozz.memory import _database

    monkeypatch.setattr(_database, "_ONE_SHOT", _database._ONE_SHOT)  # a command marks this process one-shot
    done = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    assert code is None or done.exit_code == code, (args, done.output)
    return done
