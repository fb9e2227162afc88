"""A small MCP server the in-process tests serve both ways: in this process, and over stdio
(`python tests/engine/calc_server.py`), so the two can be compared."""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel


class Sum(BaseModel):
    total: int
    terms: int


def create_server() -> MCPServer:
    server = MCPServer("calc")

    @server.tool(title="Add numbers")
    def add(numbers: list[int]) -> Sum:
        """Add the numbers."""
        if not numbers:
            raise ToolError("give at least one number to add")
        return Sum(total=sum(numbers), terms=len(numbers))

    @server.tool()
    def crash() -> str:
        """Fail in a way the server did not mean to."""
        raise RuntimeError("the abacus broke")

    return server


if __name__ == "__main__":
    create_server().run("stdio")
