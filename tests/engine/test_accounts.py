"""claude run as another account (a service that is root never runs it as root): the process, the files it
writes, the resumed session's private config; and an account that does not exist, refused before anything
starts."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from frobozz._accounts import AccountError, account, hand_over
from frobozz._scratch import LOCK_FILE, sweep_orphans
from frobozz.engine import Engine, EngineError, EngineOptions, Result, ToolResultBlock, UserMessage
from frobozz.engine.testing import InMemorySessionStore, Reply, ScriptedModel, ToolUse
from tests.conftest import other_accounts_can_run_claude
from tests.engine.conftest import of, until

pytestmark = pytest.mark.anyio
NOBODY = 65534


needs_root = pytest.mark.skipif(
    not other_accounts_can_run_claude(),
    reason="only root may run a child as another account, and only a claude other accounts can reach",
)


@pytest.fixture
def place():
    """A folder outside pytest's (which is root's alone), owned by nobody: the workspace and a HOME."""
    folder = Path(tempfile.mkdtemp(prefix="frobozz-account-"))
    (folder / "home").mkdir()
    (folder / "work").mkdir()
    hand_over(folder, NOBODY, NOBODY)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def reply(request):
    if request.tool_results():
        return "done: " + " ".join(str(r.get("content")) for r in request.tool_results())
    return Reply((ToolUse("Bash", {"command": "id -u; id -G; echo hi > made.txt"}),))


def test_an_account_is_a_name_or_an_id_and_an_unknown_one_is_a_clear_error():
    assert account(None) == (None, None)
    assert account("nobody") == (NOBODY, NOBODY) and account(NOBODY) == (NOBODY, NOBODY)
    assert account(4242) == (4242, 4242)  # an id with no passwd entry is its own group
    assert account("nobody", "root") == (NOBODY, 0)
    for bad, group in (("no-such-user-here", None), ("nobody", "no-such-group-here"), (-1, None), (True, None)):
        with pytest.raises(AccountError):
            account(bad, group)
    with pytest.raises(AccountError, match="only with a user"):
        account(None, "root")


async def test_an_unknown_account_is_refused_before_claude_starts():
    with pytest.raises(EngineError, match="no user 'no-such-user-here'"):
        Engine(EngineOptions(user="no-such-user-here"))


@needs_root
async def test_claude_runs_as_the_account_with_no_root_groups_and_its_files_are_that_accounts(place):
    async with ScriptedModel(reply) as model:
        env = {**model.env(), "HOME": str(place / "home"), "CLAUDE_CODE_MAX_RETRIES": "0"}
        options = EngineOptions(
            env=env, cwd=place / "work", user=NOBODY, allowed_tools=["Bash"], permission_mode="acceptEdits"
        )
        async with Engine(options) as engine:
            await engine.start()
            status = Path(f"/proc/{engine._process.pid}/status").read_text()
            uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
            assert set(uids) == {str(NOBODY)}
            await engine.send("who are you?")
            events = await until(engine.events(), Result)
    said = " ".join(
        str(b.content) for m in of(events, UserMessage) for b in m.content if isinstance(b, ToolResultBlock)
    )
    assert f"{NOBODY}\n{NOBODY}" in said  # uid, then its only group: root's groups were dropped
    made = place / "work" / "made.txt"
    assert made.read_text() == "hi\n" and made.stat().st_uid == NOBODY
    assert (place / "home" / ".claude").stat().st_uid == NOBODY  # claude's own config, in the account's HOME


@needs_root
async def test_a_session_resumed_from_the_store_runs_as_the_account_in_a_config_it_owns(place):
    store = InMemorySessionStore()
    async with ScriptedModel(lambda request: "noted") as model:
        env = {**model.env(), "HOME": str(place / "home"), "CLAUDE_CODE_MAX_RETRIES": "0"}
        options = EngineOptions(
            env=env, cwd=place / "work", user=NOBODY, session_store=store, session_project="accounts"
        )
        async with Engine(options) as engine:
            await engine.start()
            await engine.send("remember the lamp")
            first = (await until(engine.events(), Result))[-1]
        shutil.rmtree(place / "home" / ".claude")  # another machine: only the store has the session
        async with Engine(options) as engine:
            await engine.start(first.session_id)
            config = Path(engine.env["CLAUDE_CONFIG_DIR"])
            assert config.stat().st_uid == NOBODY
            lock = config / LOCK_FILE  # the scratch folder's lock stays this process's, so no swap fools a sweep
            assert all(p.stat().st_uid == NOBODY for p in config.rglob("*") if p != lock)
            assert lock.stat().st_uid == os.geteuid() and config not in sweep_orphans("frobozz-claude-")
            await engine.send("and now?")
            second = [e for e in await until(engine.events(), Result) if isinstance(e, Result) and not e.is_replay]
    assert second[-1].session_id == first.session_id and not second[-1].is_error
    assert "remember the lamp" in json.dumps(model.requests[-1].messages)


def test_a_file_that_goes_while_a_folder_is_handed_over_is_passed_over(tmp_path, monkeypatch):
    """claude makes and removes its `.claude.json.lock` in a HOME the agent service is handing over."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / ".claude.json").write_text("{}")
    walk = os.walk

    def listing_a_file_gone_since(top, *args, **kwargs):
        for folder, dirs, files in walk(top, *args, **kwargs):
            yield folder, dirs, [*files, ".claude.json.lock"]  # listed, then removed before its chown

    monkeypatch.setattr(os, "walk", listing_a_file_gone_since)
    hand_over(tmp_path, os.getuid(), os.getgid())
    assert (tmp_path / ".claude" / ".claude.json").stat().st_uid == os.getuid()
