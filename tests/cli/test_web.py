"""`frobozz web` as a user runs it: a real process that prints a sign-in link, serves the runs of its data
folder and memory from its database behind the token, stops on SIGTERM, and says what is wrong with its
arguments."""

import os
import signal
import subprocess
import sys

import anyio
import httpx
import pytest

from tests.cli.test_hub import frobozz, healthy
from tests.ports import free_port
from tests.waiting import eventually
from tests.web.conftest import new_run


@pytest.mark.anyio
async def test_web_prints_a_link_that_signs_in_and_serves_this_machines_runs(frobozz_env, cortex_settings):
    new_run(frobozz_env / "runs", status="finished", reason="won", won=True)
    port = free_port()
    env = {**os.environ, "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value()}
    env.pop("FROBOZZ_HUB_TOKEN", None)
    web = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "web", "--port", str(port)], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        with anyio.fail_after(60):
            line = await anyio.to_thread.run_sync(web.stderr.readline)
            await healthy(port)
        link = line.rsplit(" ", 1)[1].strip()
        assert link.startswith(f"http://127.0.0.1:{port}/?token=") and len(link.split("=", 1)[1]) >= 32
        assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 401
        with httpx.Client(follow_redirects=True, timeout=60) as browser:
            page = browser.get(link)
            assert page.status_code == 200 and "20261123-120000-abc123" in page.text
            assert "token=" not in str(page.url)  # signed in, and the token is out of the address bar
            assert browser.get(f"http://127.0.0.1:{port}/memory").status_code == 200
            chat = browser.get(f"http://127.0.0.1:{port}/chat").text  # says at once, with no form to fill first
            assert 'id="not-served"' in chat and "frobozz serve all --http --workspaces ROOT" in chat
            assert 'name="workspace"' not in chat and "chat.js" not in chat
        web.send_signal(signal.SIGTERM)
        assert web.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn shuts down, then re-raises the signal
    finally:
        web.kill()
        web.wait()


@pytest.mark.anyio
async def test_web_killed_with_sigkill_takes_the_embedded_postgres_it_started_with_it(frobozz_env):
    port = free_port()
    env = {**os.environ, "FROBOZZ_HUB_TOKEN": "a-token-long-enough-for-the-hub"}
    env.pop("FROBOZZ_DATABASE_URL", None)  # the embedded default, as on a fresh install
    web = subprocess.Popen(
        [sys.executable, "-m", "frobozz", "web", "--port", str(port)], stderr=subprocess.DEVNULL, env=env
    )
    postmaster = frobozz_env / "postgres" / "postmaster.pid"
    try:
        with anyio.fail_after(60):
            await healthy(port)
        page = httpx.get(
            f"http://127.0.0.1:{port}/", headers={"Authorization": f"Bearer {env['FROBOZZ_HUB_TOKEN']}"}, timeout=60
        )
        assert page.status_code == 200 and "Leaderboard" in page.text and postmaster.exists()  # it started one
    finally:
        web.kill()
        web.wait()
    with anyio.fail_after(15):
        await eventually(lambda: not postmaster.exists(), interval=0.1)


def test_bad_arguments_are_clear_errors(tmp_path):
    (tmp_path / "bad.toml").write_text("[[token]]\nname = 1\n")
    for args, message in (
        (["--tokens", str(tmp_path / "bad.toml")], "FROBOZZ_HUB_TOKENS"),
        (["--tokens", str(tmp_path / "missing.toml")], "cannot read"),
        (["--token", "short"], "at least 16"),
        (["--port", "0"], "--port"),
        (["--port", "http"], "--port"),
    ):
        done = frobozz("web", *args, check=False)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    # a token from the environment is blamed on its variable, not on an option no one gave
    for command in (["web"], ["serve", "all", "--http"], ["serve", "agent", "--workspaces", str(tmp_path)]):
        done = frobozz(*command, env={**os.environ, "FROBOZZ_HUB_TOKEN": "tok123"}, check=False)
        said = " ".join(done.stderr.replace("│", " ").split())
        assert done.returncode == 2 and "Invalid value for FROBOZZ_HUB_TOKEN: " in said, (command, said)
        assert "at least 16 characters" in said and "--token" not in said, (command, said)


def test_a_port_already_in_use_is_one_error_line_and_no_address_or_sign_in_link_is_printed_before_it(frobozz_env):
    """The web view printed its address and a fresh sign-in link, then failed to bind: the link led to whatever
    held the port, which refused the token."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        done = frobozz("web", "--port", str(taken.getsockname()[1]), check=False)
    assert done.returncode == 3 and "address already in use" in done.stderr, done.stderr
    assert "frobozz web on" not in done.stderr and "token=" not in done.stderr
