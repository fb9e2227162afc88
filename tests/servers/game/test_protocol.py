"""The game server's MCP utilities: completion (games, save slots), logging, both protocol versions."""

import logging

import pytest
from mcp import Client
from mcp_types import PromptReference

from frobozz.servers.game import Settings, create_server
from tests.servers.mcp import call

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]


async def complete(client, prompt: str, argument: str, value: str, **given: str) -> list[str]:
    result = await client.complete(PromptReference(name=prompt), {"name": argument, "value": value}, given or None)
    return result.completion.values


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_both_protocol_versions_are_answered_with_completion_and_logging_offered(frobozz_env, mode):
    """2025-11-25 by the initialize handshake; 2026-07-28 by server/discover (what "auto" tries first)."""
    async with Client(create_server(Settings()), mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        capabilities = client.server_capabilities
        assert None not in (capabilities.completions, capabilities.prompts, capabilities.logging)
        assert "zork1" in await complete(client, "play", "game", "zo")


async def test_a_game_name_completes_from_the_games_there_are_and_nothing_matches_nothing(frobozz_env):
    async with Client(create_server(Settings())) as client:
        everything = await complete(client, "play", "game", "")
        assert "zork1" in everything and any(v.endswith(".z3") for v in everything)  # names, and story files
        assert set(await complete(client, "play", "game", "zo")) == {v for v in everything if v.startswith("zo")}
        assert await complete(client, "play", "game", "ZORK") == await complete(client, "play", "game", "zork")
        assert await complete(client, "play", "game", "no such game") == []
        assert await complete(client, "play", "game", "x" * 5000) == []
        assert await complete(client, "no_such_prompt", "game", "zo") == []  # nothing to suggest, no error


async def test_save_slots_complete_for_the_game_given_and_only_then(frobozz_env):
    async with Client(create_server(Settings())) as client:
        assert await complete(client, "restore_save", "slot", "", game="zork1") == []  # the empty case first
        sid = (await call(client, "new_game", game="zork1"))["session_id"]
        await call(client, "save", session_id=sid, slot="before-troll")
        await call(client, "save", session_id=sid, slot="attic")
        assert sorted(await complete(client, "restore_save", "slot", "", game="zork1")) == ["attic", "before-troll"]
        assert await complete(client, "restore_save", "slot", "be", game="zork1") == ["before-troll"]
        assert await complete(client, "restore_save", "slot", "") == []  # which game's? none said
        assert await complete(client, "restore_save", "slot", "", game="../../etc/passwd") == []  # refused, quietly
        prompt = await client.get_prompt("restore_save", {"game": "zork1", "slot": "attic"})
        assert "'attic'" in prompt.messages[0].content.text


async def test_the_servers_log_lines_reach_the_client_at_the_level_it_set_and_stderr_is_unchanged(
    frobozz_env, stderr_handler
):
    received = []

    async def on_log(params) -> None:
        received.append(params)

    async with Client(create_server(Settings()), mode="legacy", logging_callback=on_log) as client:
        await client.call_tool("act", {"session_id": "nope", "command": "look"})  # a tool error: logged at info
        assert received == []  # under the default level (warning): nothing
        await client.set_logging_level("info")
        await client.call_tool("act", {"session_id": "nope", "command": "look"})
        assert [(r.level, r.logger) for r in received] == [("info", "frobozz.servers")]
        assert "no game session 'nope'" in received[0].data
        assert logging.getLogger("frobozz").level == logging.NOTSET  # lowered only while a request was in flight
        await client.set_logging_level("error")
        await client.call_tool("act", {"session_id": "nope", "command": "look"})
        assert len(received) == 1
    logging.getLogger("frobozz.servers").warning("a warning still shows")
    assert stderr_handler.getvalue() == "a warning still shows\n"  # the info lines went to the client only


async def test_on_the_2026_revision_log_lines_come_only_to_a_request_that_asked(frobozz_env, stderr_handler):
    received = []

    async def on_log(params) -> None:
        received.append(params)

    async with Client(create_server(Settings()), mode="auto", logging_callback=on_log) as client:
        await client.call_tool("act", {"session_id": "nope", "command": "look"})
    assert received == []
    async with Client(create_server(Settings()), mode="auto", logging_callback=on_log, log_level="info") as client:
        await client.call_tool("act", {"session_id": "nope", "command": "look"})
    assert [r.level for r in received] == ["info"]
    assert logging.getLogger("frobozz").level == logging.NOTSET and stderr_handler.getvalue() == ""


async def test_an_unknown_prompt_or_a_missing_argument_is_invalid_params_not_a_server_error(frobozz_env):
    """MCPServer raises ValueError for these (code 0 and a traceback in the log); the servers answer -32602."""
    from mcp.shared.exceptions import MCPError

    async with Client(create_server(Settings())) as client:
        for name, arguments in (("no_such_prompt", {}), ("play", {}), ("play", {"game": "x" * 5000})):
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, arguments)
            assert refused.value.error.code == -32602, (name, refused.value)
        assert (await client.get_prompt("play", {"game": "zork1"})).messages  # and a good one still works
