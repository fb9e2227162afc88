"""A setting that is malformed (a URL no client can read, a namespace that cannot be one) is one line naming the
variable, exit 1, no traceback and nothing written, in every command that uses it."""

import os
import subprocess
import sys

import pytest


def frobozz(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "frobozz", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250", **env},
    )


def said_in_one_line(done, *words):
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and all(w in line for w in words), line


@pytest.mark.parametrize(
    "command", [("runs",), ("leaderboard",), ("routine", "list"), ("cortex", "search", "x"), ("worker",)]
)
def test_a_database_url_with_a_port_that_is_no_number_is_one_line_naming_it_in_each_command(frobozz_env, command):
    done = frobozz({"FROBOZZ_DATABASE_URL": "postgresql://u:hunter2@h:notaport/db"}, *command)
    said_in_one_line(done, "FROBOZZ_DATABASE_URL", "'notaport' is not a number")
    assert "hunter2" not in done.stderr
    assert not frobozz_env.exists() or not any(frobozz_env.rglob("*.jsonl"))


def test_a_database_url_with_a_broken_ipv6_host_is_one_line_naming_it(frobozz_env):
    said_in_one_line(frobozz({"FROBOZZ_DATABASE_URL": "postgresql://[::1"}, "runs"), "FROBOZZ_DATABASE_URL", "IPv6")


REMOTE = {"FROBOZZ_EMBEDDING_PROVIDER": "ollama", "FROBOZZ_EMBEDDING_MODEL": "m", "FROBOZZ_EMBEDDING_DIM": "384"}


@pytest.mark.parametrize(
    ("env", "command"),
    [
        ({**REMOTE, "FROBOZZ_EMBEDDING_URL": "http://[::1"}, ("cortex", "search", "x")),
        ({**REMOTE, "FROBOZZ_EMBEDDING_URL": "http://[::1"}, ("doctor",)),
        ({"FROBOZZ_EMBEDDING_ONNX_URL": "http://[::1"}, ("cortex", "search", "hello")),
        (
            {
                "FROBOZZ_CORTEX_VISION_MODEL": "m",
                "FROBOZZ_CORTEX_VISION_API_KEY": "k",
                "FROBOZZ_CORTEX_VISION_URL": "http://[::1",
            },
            ("cortex", "store", "red"),
        ),
    ],
)
def test_a_url_setting_that_is_no_url_is_one_line_naming_it(frobozz_env, env, command):
    variable = next(k for k in env if k.endswith("_URL"))
    said_in_one_line(frobozz(env, *command), variable, "not a URL")


def test_games_install_from_a_url_that_is_no_url_is_one_line(frobozz_env):
    said_in_one_line(frobozz({}, "games", "install", "zork1", "--url", "http://[::1"), "download of", "Invalid port")


def test_an_invalid_default_namespace_is_one_line_naming_the_variable_not_a_namespace_option(frobozz_env):
    done = frobozz({"FROBOZZ_CORTEX_DEFAULT_NAMESPACE": "bad/ns"}, "cortex", "store", "hello")
    said_in_one_line(done, "FROBOZZ_CORTEX_DEFAULT_NAMESPACE", "not a namespace")
