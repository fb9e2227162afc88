"""The ready MCP configs in mcp-config/, and the ones made for this install."""

import json
import sys
from pathlib import Path

import pytest

from frobozz.servers import BUNDLES, SERVERS, ConfigError, config_for, install_config, portable

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
