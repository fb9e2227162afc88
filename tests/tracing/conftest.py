"""Arize Phoenix, a real tracing backend (OTLP in, an API to read spans back), for the whole test session:
installed by scripts/phoenix into .venv-phoenix (bin/test runs it), started here on free loopback ports."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from frobozz._children import dying_with_parent
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
START = 300  # seconds Phoenix may take to start on a loaded machine (its first start migrates its database)
SETUP = 240  # seconds a test waits for bin/test's Phoenix install still under way


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """pytest-timeout counts a test's fixtures too: the first test to use Phoenix may wait for its install and
    its first start (migrations) before its own body, so it gets those limits on top of the suite's 300 s."""
    for item in items:
        if "phoenix" in getattr(item, "fixturenames", ()) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SETUP + START + 300))


def _wait_for_the_install() -> None:
    """bin/test installs Phoenix while the suite runs; FROBOZZ_PHOENIX_SETUP names the file its exit code
    appears in when the install ends (the tracing tests come late in the suite: they seldom wait)."""
    status = os.environ.get("FROBOZZ_PHOENIX_SETUP")
    if not status:
        return
    deadline = time.monotonic() + SETUP
    while not os.path.exists(status):
        if time.monotonic() > deadline:
            pytest.fail(f"Phoenix's install by bin/test (scripts/phoenix) has not ended after {SETUP} s")
        time.sleep(0.5)
    code = Path(status).read_text().strip()
    if code != "0":
        pytest.fail(f"installing Phoenix failed (scripts/phoenix exited {code}; bin/test shows its output at the end)")


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Phoenix's base URL: OTLP/HTTP at /v1/traces, spans read back from /v1/projects/NAME/spans."""
    _wait_for_the_install()
    exe = os.environ.get("FROBOZZ_PHOENIX") or str(ROOT / ".venv-phoenix" / "bin" / "phoenix")
    if not shutil.which(exe):
        pytest.fail("the tracing tests need Arize Phoenix: run scripts/phoenix (bin/test does)")
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    with open(work / "phoenix.log", "wb") as log:
        process = subprocess.Popen(
            dying_with_parent([exe, "serve"]), env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Phoenix did not start: {(work / 'phoenix.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def phoenix_spans(url: str, project: str) -> list[dict[str, Any]]:
    """Every span Phoenix holds for `project`, following its pages."""
    spans: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        answer = httpx.get(f"{url}/v1/projects/{project}/spans", params=params, timeout=30)
        if answer.status_code == 404:
            return []
        answer.raise_for_status()
        body = answer.json()
        spans += body["data"]
        cursor = body.get("next_cursor")
        if not cursor:
            return spans


def wait_for_spans(url: str, project: str, predicate: Any, timeout: float = 120) -> list[dict[str, Any]]:
    """Until Phoenix holds what `predicate` asks of the project's spans (it ingests in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = phoenix_spans(url, project)
        if predicate(spans):
            return spans
        if time.monotonic() > deadline:
            names: dict[str, int] = {}
            for s in spans:
                names[s["name"]] = names.get(s["name"], 0) + 1
            raise AssertionError(f"Phoenix holds {len(spans)} spans of {project}, not what was awaited: {names}")
        time.sleep(0.5)
