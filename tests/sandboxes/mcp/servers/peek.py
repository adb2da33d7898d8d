"""A stdio MCP server (the mcp SDK's MCPServer) with one tool, `run`, that runs a shell command
and answers its output: what a server in the jail could show the agent of its surroundings, for
the isolation tests (tests/sandboxes/test_bwrap_isolation.py)."""

from __future__ import annotations

import subprocess

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentworld-test-peek")


@server.tool()
def run(command: str) -> str:
    """Run `command` with sh; its stdout and stderr together."""
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


if __name__ == "__main__":
    server.run("stdio")
