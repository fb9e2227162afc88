"""The ready MCP configs in mcp-config/, and the ones made for this install."""

import json
import sys
from pathlib import Path

import pytest

from frobozz.servers import BUNDLES, SERVERS, ConfigError, config_for, hub_config, install_config, portable

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_the_shipped_config_files_hold_their_servers(bundle):
    shipped = json.loads((ROOT / "mcp-config" / f"{bundle}.json").read_text())
    assert shipped == portable(list(BUNDLES[bundle]))
    assert set(BUNDLES["frobozz"]) == set(SERVERS)  # the full hub has every server


def test_an_install_config_uses_this_python_and_absolute_paths(tmp_path):
    config = config_for(
        ["game"], {"FROBOZZ_GAMES_DIR": "relative/games", "FROBOZZ_DATABASE_URL": "postgresql://secret"}
    )
    game = config["mcpServers"]["game"]
    assert game["command"] == sys.executable and game["args"] == ["-m", "frobozz", "serve", "game"]
    assert game["env"] == {"FROBOZZ_GAMES_DIR": str(Path("relative/games").resolve())}  # never the secret URL


def test_install_merges_into_mcp_json_and_keeps_other_servers(tmp_path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "extra": 1}))
    path, added = install_config(config_for(["cortex", "handoff"], {}), tmp_path)
    merged = json.loads(path.read_text())
    assert added == ["cortex", "handoff"] and merged["extra"] == 1
    assert list(merged["mcpServers"]) == ["other", "cortex", "handoff"]
    install_config(config_for(["cortex"], {}), tmp_path)  # again: replaced, not doubled
    assert list(json.loads(path.read_text())["mcpServers"]) == ["other", "cortex", "handoff"]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"mcpServers": []}', "\udcff"])
def test_install_refuses_a_broken_mcp_json_and_leaves_it_as_it_was(tmp_path, content):
    target = tmp_path / ".mcp.json"
    target.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigError, match="fix or move it"):
        install_config(config_for(["game"], {}), tmp_path)
    assert target.read_bytes() == content.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("names", [[], ["nope"], ["game", "../etc"]])
def test_unknown_servers_are_refused_by_name(names):
    with pytest.raises(ConfigError, match="known: game"):
        config_for(names, {})


def test_a_hub_config_names_each_servers_endpoint_with_the_token_and_handoff_is_sent_the_session():
    given = hub_config(["game", "handoff"], " https://hub.example:8765/frobozz/ ", "t" * 43)
    assert given["mcpServers"]["game"] == {
        "type": "http",
        "url": "https://hub.example:8765/frobozz/game/mcp",
        "headers": {"Authorization": f"Bearer {'t' * 43}"},
    }
    assert given["mcpServers"]["handoff"]["headers"] == {
        "Authorization": f"Bearer {'t' * 43}",
        "X-Frobozz-Session-Id": "${FROBOZZ_SESSION_ID:-}",  # claude expands it from its environment as it starts
    }
    from_env = hub_config(["cortex"], "http://127.0.0.1:8765")["mcpServers"]["cortex"]
    assert from_env["headers"] == {"Authorization": "Bearer ${FROBOZZ_HUB_TOKEN}"}  # no secret written


@pytest.mark.parametrize(
    ("url", "token", "said"),
    [
        ("", None, "not an http:// or https:// address"),
        ("127.0.0.1:8765", None, "not an http:// or https:// address"),
        ("ftp://127.0.0.1:8765", None, "not an http:// or https:// address"),
        ("http://", None, "not an http:// or https:// address"),
        ("http://127.0.0.1:99999", None, "is not an address: its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:port", None, "is not an address: its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:0", None, "is not an address: its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:-1", None, "is not an address: its port is not a number from 1 to 65535"),
        ("http://[::1", None, "is not an address"),
        ("http://127.0.0.1:8765/cortex/mcp", None, "one server's endpoint"),
        ("http://127.0.0.1:8765/?token=abc", None, "query"),
        ("http://user:pw@127.0.0.1:8765", None, "password"),
        ("http://127.0.0.1:8765\n/x", None, "control characters"),
        ("http://127.0.0.1:8765", "short", "16 characters"),
        ("http://127.0.0.1:8765", "sixteen-chars-and\r\nX-Evil: 1", "no spaces"),
    ],
)
def test_a_hub_config_refuses_what_is_not_a_hubs_address_or_token(url, token, said):
    with pytest.raises(ConfigError, match=said):
        hub_config(["game"], url, token)


def test_a_hub_config_sends_the_memory_servers_a_namespace_and_refuses_one_that_cannot_be():
    given = hub_config(["cortex", "handoff", "game"], "http://127.0.0.1:8765", namespace="team")["mcpServers"]
    assert given["cortex"]["headers"]["X-Frobozz-Namespace"] == "team"
    assert given["handoff"]["headers"]["X-Frobozz-Namespace"] == "team"
    assert "X-Frobozz-Namespace" not in given["game"]["headers"]  # (it keeps no namespaces)
    for bad in ["", "two words", "x" * 101, "team\r\nX-Evil: 1"]:
        with pytest.raises(ConfigError, match="invalid namespace"):
            hub_config(["cortex"], "http://127.0.0.1:8765", namespace=bad)
