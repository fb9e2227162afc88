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
        assert a.title and None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint,
                                        a.open_world_hint), tool.name
        assert tool.output_schema, tool.name
