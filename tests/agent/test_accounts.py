"""Run as root, the service runs each claude as its workspace's owner, never as root: a new user gets a uid of
its own (no account on the machine has it, no other user shares it), an admin may give a user folder to an
existing account, a folder root owns is refused. What the service writes into a workspace is the owner's, and
never written through a link the owner planted."""

import os
import pwd
import stat
from pathlib import Path

import pytest

from frobozz.agent import Done, ToolResult, WorkspaceError
from frobozz.agent._owners import HOMES
from frobozz.agent._workspaces import Workspaces
from tests.agent.test_agent import turn
from tests.conftest import other_accounts_can_run_claude

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="only a service run as root runs claude as another account"),
]
as_others = pytest.mark.skipif(
    os.geteuid() == 0 and not other_accounts_can_run_claude(),
    reason="this checkout's claude is in a folder other accounts cannot reach",
)
NOBODY = 65534
BIG = "lamp oil, rope, garlic. " * 1000  # over the inline threshold: written under the workspace


def said_by_tools(events):
    return " ".join(str(e.output) for e in events if isinstance(e, ToolResult))


@as_others
async def test_each_new_user_gets_a_uid_of_its_own_and_their_claude_and_files_are_that_uids(agent, roots):
    root, platform = roots
    (platform / "skills" / "maps").mkdir(parents=True)
    (platform / "skills" / "maps" / "SKILL.md").write_text("---\nname: maps\ndescription: maps\n---\nDraw.\n")
    alice = await agent.create_session("alice/notes", attached=[{"name": "supplies.txt", "content": BIG}])
    bob = await agent.create_session("bob/notes")
    events = await turn(agent, alice, "run id -u; id -G; echo hi > made.txt")
    assert isinstance(events[-1], Done) and not events[-1].is_error
    uid = (root / "alice").stat().st_uid
    assert uid >= 2_000_000 and (root / "bob").stat().st_uid not in (uid, 0)
    with pytest.raises(KeyError):
        pwd.getpwuid(uid)  # no account on the machine: nothing else runs as it
    assert f"{uid}\n{uid}" in said_by_tools(events)  # claude's uid, and its only group: none of root's
    workspace = root / "alice" / "notes"
    made = [
        workspace / "made.txt",
        workspace / ".frobozz" / "attached" / "supplies.txt",
        workspace / ".claude" / "skills" / "maps" / "SKILL.md",
        workspace / ".claude" / "skills" / "maps",
    ]
    assert all(p.stat().st_uid == uid for p in made)
    home = root / HOMES / str(uid)
    assert home.stat().st_uid == uid and stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "alice").stat().st_mode) == 0o700  # bob's claude cannot read alice's files
    events = await turn(agent, bob, f"run cat {workspace}/made.txt")
    assert "Permission denied" in said_by_tools(events)


@as_others
async def test_a_user_folder_an_admin_gave_to_an_account_runs_as_that_account(agent, roots):
    root, _ = roots
    (root / "dave").mkdir()
    os.chown(root / "dave", NOBODY, NOBODY)
    session = await agent.create_session("dave/notes")
    events = await turn(agent, session, "run id -u")
    assert str(NOBODY) in said_by_tools(events)
    assert (root / "dave" / "notes").stat().st_uid == NOBODY


@as_others
async def test_a_workspace_root_owns_is_refused_and_nothing_is_made(agent, roots):
    root, _ = roots
    (root / "carol").mkdir()  # made by root, given to nobody
    with pytest.raises(WorkspaceError, match="belongs to root, and claude never runs as root"):
        await agent.create_session("carol/notes")
    assert list((root / "carol").iterdir()) == []
    assert await agent.sessions() == []


@as_others
async def test_a_link_the_owner_planted_is_never_written_through(agent, roots, open_dir):
    first = await agent.create_session("erin/notes")
    workspace = (await agent.session(first)).workspace.path
    outside = open_dir / "elsewhere"
    outside.mkdir()
    (workspace / ".frobozz").symlink_to(outside)  # as the owner could, from their claude
    with pytest.raises(WorkspaceError, match="is a link"):
        await agent.create_session("erin/notes", attached=[{"name": "big.txt", "content": BIG}])
    assert list(outside.iterdir()) == []


def test_a_new_users_uid_skips_those_taken_by_accounts_and_by_other_user_folders(tmp_path):
    taken = pwd.getpwnam("nobody").pw_uid
    spaces = Workspaces(tmp_path, first_uid=taken, accounts=True)
    first = spaces.resolve("alice/notes").account
    second = spaces.resolve("bob/notes").account
    assert first == (taken + 1, taken + 1) and second == (taken + 2, taken + 2)
    assert Workspaces(tmp_path, accounts=False).resolve("carol/notes").account is None


def test_a_claude_is_not_given_a_home_its_account_cannot_reach(tmp_path):
    """The service as a library (no `serve agent` to check at start): each claude's HOME is checked as it is made."""
    from frobozz.agent import AgentError
    from frobozz.agent._owners import Owners

    tmp_path.chmod(0o700)  # (pytest's own are root's alone already, when the tests are root)
    owners = Owners(tmp_path / "root", first_uid=2_000_000, active=True)
    with pytest.raises(AgentError, match="lets no other account through"):
        owners.home(2_000_000, 2_000_000, {})
    assert not (tmp_path / "root").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a HOME is handed to its account only by a service run as root")
def test_the_homes_folder_lets_the_accounts_through_whatever_the_umask(open_dir):
    """mkdir's mode is cut by the umask: under 027 `.homes` was 0710, and no account could reach its HOME."""
    from frobozz.agent._owners import Owners

    (open_dir / "root").mkdir()
    was = os.umask(0o077)
    try:
        env = Owners(open_dir / "root", first_uid=2_000_000, active=True).home(2_000_000, 2_000_000, {})
    finally:
        os.umask(was)
    assert stat.S_IMODE((open_dir / "root" / HOMES).stat().st_mode) == 0o711
    assert Path(env["HOME"]).stat().st_uid == 2_000_000


def test_a_tenants_home_mirrors_the_services_sign_in_and_settings_as_they_are_at_each_start(open_dir):
    """A settings file the operator removed (its hook, which cannot run as the tenant, blocked every prompt) is
    gone from the tenant's HOME at its claude's next start, not kept from an earlier copy; a change the tenant's
    claude made to its copy is written over; a config folder the tenant made a link is refused, nothing written."""
    from frobozz.agent._owners import Owners

    operator = open_dir / "operator"
    operator.mkdir()
    (operator / "settings.json").write_text('{"hooks": {"UserPromptSubmit": [{"hooks": []}]}}')
    (operator / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "at"}}')
    env = {"CLAUDE_CONFIG_DIR": str(operator), "HOME": str(open_dir)}
    (open_dir / "root").mkdir()
    owners = Owners(open_dir / "root", first_uid=2_000_000, active=True)
    config = Path(owners.home(2_000_000, 2_000_000, env)["CLAUDE_CONFIG_DIR"])
    assert (config / "settings.json").stat().st_uid == 2_000_000  # its claude may rewrite it, until its next start
    (config / "settings.json").write_text('{"model": "the tenant chose"}')
    (operator / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "renewed"}}')
    owners.home(2_000_000, 2_000_000, env)
    assert (config / "settings.json").read_text() == (operator / "settings.json").read_text()
    assert "renewed" in (config / ".credentials.json").read_text()
    (operator / "settings.json").unlink()
    owners.home(2_000_000, 2_000_000, env)
    assert not (config / "settings.json").exists()
    other = open_dir / "root" / HOMES / "2000001"
    elsewhere = open_dir / "elsewhere"
    elsewhere.mkdir()
    other.mkdir(parents=True)
    (other / ".claude").symlink_to(elsewhere)
    with pytest.raises(WorkspaceError, match="is a link"):
        owners.home(2_000_001, 2_000_001, env)
    assert list(elsewhere.iterdir()) == []
