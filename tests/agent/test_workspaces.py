"""Workspaces: what is refused (nothing made), the MCP servers of the hierarchy, and skills synced in."""

import json
import shutil

import pytest

from frobozz.agent import WorkspaceError, Workspaces


@pytest.mark.parametrize(
    "spec",
    [
        "../escape",
        "alice/..",
        "/etc/passwd",
        "alice/../../x",
        "alice",
        "a/b/c",
        "",
        "alice/.",
        "alice/na me",
        "alice/" + "x" * 100,
        None,
        7,
    ],
)
def test_a_workspace_outside_the_root_or_badly_named_is_refused_and_nothing_is_made(tmp_path, spec):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(WorkspaceError):
        Workspaces(root).resolve(spec)
    assert list(root.iterdir()) == []


def test_a_symlink_that_leads_out_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "alice").mkdir(parents=True)
    outside.mkdir()
    (root / "alice" / "notes").symlink_to(outside)
    (root / "mallory").symlink_to(outside)
    (root / "alice" / "bobs").symlink_to(root / "bob")
    for spec in ("alice/notes", "mallory/anything", "alice/bobs"):
        with pytest.raises(WorkspaceError, match="link"):
            Workspaces(root).resolve(spec)
    assert list(outside.iterdir()) == [] and not (root / "bob").exists()


def test_a_good_name_is_made_under_the_root(tmp_path):
    space = Workspaces(tmp_path).resolve("alice/notes")
    assert (
        space.path == (tmp_path / "alice" / "notes").resolve() and space.path.is_dir() and space.spec == "alice/notes"
    )


def test_mcp_servers_come_from_each_level_the_later_winning_and_each_stdio_one_knows_its_workspace(tmp_path):
    root, platform = tmp_path / "root", tmp_path / "platform"
    platform.mkdir()
    space = Workspaces(root, platform).resolve("alice/notes")
    (platform / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "tools": {"command": "platform-tools"},
                    "search": {"command": "search", "env": {"WORKSPACE_PATH": "/mine"}},
                    "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
                }
            }
        )
    )
    (root / "alice" / ".mcp.json").write_text(json.dumps({"mcpServers": {"tools": {"command": "user-tools"}}}))
    (space.path / ".mcp.json").write_text(json.dumps({"mcpServers": {"tools": {"command": "workspace-tools"}}}))
    servers = Workspaces(root, platform).mcp_servers(space)
    assert servers["tools"] == {"command": "workspace-tools", "env": {"WORKSPACE_PATH": str(space.path)}}
    assert servers["search"]["env"] == {"WORKSPACE_PATH": "/mine"}  # its own config set it
    assert "env" not in servers["remote"]
    assert Workspaces(root).mcp_servers(Workspaces(root).resolve("bob/empty")) == {}
    (space.path / ".mcp.json").write_text("{not json")
    with pytest.raises(WorkspaceError, match="not readable JSON"):
        Workspaces(root, platform).mcp_servers(space)


def skill(folder, name, text):
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n{text}\n")


def test_skills_sync_in_with_the_workspace_winning_and_only_synced_ones_removed(tmp_path):
    root, platform = tmp_path / "root", tmp_path / "platform"
    spaces = Workspaces(root, platform)
    space = spaces.resolve("alice/notes")
    assert spaces.sync_skills(space) == [] and not (space.path / ".claude").exists()  # nothing to sync
    skill(platform / "skills", "maps", "platform maps")
    skill(platform / "skills", "lamps", "platform lamps")
    skill(root / "alice" / "skills", "lamps", "alice's lamps")
    own = space.path / ".claude" / "skills"
    skill(own, "notes", "the workspace's own notes")
    skill(own, "maps", "the workspace's own maps")
    assert spaces.sync_skills(space) == ["lamps"]
    assert "alice's lamps" in (own / "lamps" / "SKILL.md").read_text()  # the user's over the platform's
    assert "own maps" in (own / "maps" / "SKILL.md").read_text()  # the workspace's own wins
    skill(root / "alice" / "skills", "lamps", "alice's brighter lamps")
    spaces.sync_skills(space)
    assert "brighter" in (own / "lamps" / "SKILL.md").read_text()  # a changed skill is copied again

    shutil.rmtree(root / "alice" / "skills" / "lamps")
    shutil.rmtree(platform / "skills")
    assert spaces.sync_skills(space) == []
    assert not (own / "lamps").exists() and (own / "notes").is_dir() and (own / "maps").is_dir()


def test_the_sync_copies_no_link_and_writes_through_none_that_the_user_planted(tmp_path):
    root, secret = tmp_path / "root", tmp_path / "secret.txt"
    secret.write_text("root's secret")
    spaces = Workspaces(root)
    space = spaces.resolve("alice/notes")
    skill(root / "alice" / "skills", "maps", "alice's maps")
    (root / "alice" / "skills" / "maps" / "leak.txt").symlink_to(secret)  # the user's folder is the user's
    (root / "alice" / "skills" / "maps" / "deeper").symlink_to(tmp_path)
    assert spaces.sync_skills(space) == ["maps"]
    synced = space.path / ".claude" / "skills" / "maps"
    assert sorted(p.name for p in synced.iterdir()) == ["SKILL.md"]  # the links were left out, not followed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(synced)
    synced.symlink_to(elsewhere)  # planted where the sync will write again
    skill(root / "alice" / "skills", "maps", "alice's newer maps")
    spaces.sync_skills(space)
    assert list(elsewhere.iterdir()) == [] and not synced.is_symlink()
    assert "newer maps" in (synced / "SKILL.md").read_text()
    shutil.rmtree(space.path / ".claude")
    (space.path / ".claude").symlink_to(elsewhere)  # the whole folder a link: refused, nothing written there
    with pytest.raises(WorkspaceError, match="is a link or a file"):
        spaces.sync_skills(space)
    assert list(elsewhere.iterdir()) == []


def test_a_users_skills_folder_that_is_a_link_is_not_synced(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    skill(outside, "stolen", "not alice's")
    spaces = Workspaces(root)
    space = spaces.resolve("alice/notes")
    (root / "alice" / "skills").symlink_to(outside)
    assert spaces.sync_skills(space) == [] and not (space.path / ".claude").exists()
