"""A tiny MCP server over streamable HTTP, written with the mcp SDK's MCPServer, for the sandbox's
http-transport tests: `python http_app.py PORT`."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentworld-test-http")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
