"""Calling a server's tools in tests: the structured result, or the error message."""

from mcp import Client


async def call(client: Client, tool: str, **arguments):
    """The tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error(client: Client, tool: str, **arguments) -> str:
    """The tool's error message; fails the test when the call succeeds."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) should have failed"
    return result.content[0].text


def assert_conventions(tools) -> None:
    """Every tool has a title, all four annotations and an output schema."""
    for tool in tools:
        a = tool.annotations
        assert a.title and None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint), (
            tool.name
        )
        assert tool.output_schema, tool.name


async def complete(client: Client, prompt: str, argument: str, value: str = "", **given: str) -> list[str]:
    """What the server suggests for a prompt's argument, given what was typed and the other arguments."""
    from mcp_types import PromptReference

    result = await client.complete(PromptReference(name=prompt), {"name": argument, "value": value}, given or None)
    return result.completion.values
