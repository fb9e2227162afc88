"""A traced command's exit: what still waits is sent in a bounded time, a backend that is down is not waited
for (the exporter's retries held a `frobozz play --trace` ~7 s after its work), and spans it did not get are
said in one line. Real commands, a real closed port, a real OTLP receiver."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import anyio
import asyncpg

from frobozz import _spans
from frobozz.tracing import run_spans
from frobozz.tracing._setup import LOCAL_EXIT_WAIT
from tests.otlp import receiver
from tests.ports import free_port

EXIT = 4.0  # seconds a command may take to exit once its work is done: well below the retries' ~7 s
PLAY = [sys.executable, "-m", "frobozz", "play", "zork1", "--player", "walkthrough", "--max-turns", "3", "--trace"]


def _play_until_done(env: dict[str, str], within: float = EXIT) -> tuple[int, str]:
    """Plays three turns; once the run's last line is out (the work done), the process must end within `within`
    seconds. Its exit code and its whole stderr."""
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, **env}
    process = subprocess.Popen(PLAY, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:  # the run's summary, on stderr: the work is done
            lines.append(line)
            if "max turns" in line:
                break
        try:
            _, rest = process.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {within} s after its work was done: {''.join(lines)}") from None
        return process.returncode, "".join(lines) + rest
    finally:
        process.kill()
        process.wait()


def test_a_traced_play_whose_backend_is_down_exits_at_once_and_says_in_one_line_that_its_spans_were_dropped(
    frobozz_env,
):
    code, stderr = _play_until_done(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}", "FROBOZZ_TRACE_KEEP_DAYS": "0"}
    )
    assert code == 0, stderr
    said = [line for line in stderr.splitlines() if "spans did not reach" in line]
    assert len(said) == 1, stderr
    assert "/v1/traces" in said[0] and "they are dropped" in said[0]
    assert "Traceback" not in stderr and "retrying" not in stderr


def test_a_traced_play_sends_every_span_to_a_slow_backend_at_its_exit_and_says_nothing(frobozz_env):
    with receiver() as got:
        got.delay = 0.5  # each export waits half a second for its answer
        code, stderr = _play_until_done({"OTEL_EXPORTER_OTLP_ENDPOINT": got.url, "FROBOZZ_TRACE_KEEP_DAYS": "0"})
        assert code == 0, stderr
        names = [s["name"] for s in got.spans]
    assert names.count(_spans.TURN) >= 3, names
    assert "spans did not reach" not in stderr, stderr


def test_a_traced_play_whose_backend_is_down_keeps_its_spans_in_the_local_database_and_says_so(cortex_settings):
    url = cortex_settings.database_url.get_secret_value()
    code, stderr = _play_until_done(  # (the local store's first batch may wait for its database: its own bound)
        {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}", "FROBOZZ_DATABASE_URL": url},
        within=LOCAL_EXIT_WAIT + EXIT,
    )
    assert code == 0, stderr
    said = [line for line in stderr.splitlines() if "spans did not reach" in line]
    assert len(said) == 1 and "they are kept in the local database only" in said[0], stderr
    run_id = re.search(r"run (\S+): max turns", stderr).group(1)  # type: ignore[union-attr]

    async def kept() -> list[str]:
        connection = await asyncpg.connect(url)
        try:
            return [s["name"] for s in await run_spans(connection, run_id)]
        finally:
            await connection.close()

    assert anyio.run(kept).count(_spans.TURN) >= 3
