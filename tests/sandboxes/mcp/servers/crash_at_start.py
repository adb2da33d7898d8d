"""An MCP server that crashes while starting, before it answers the handshake, the way a server
with a missing configuration does: `python crash_at_start.py`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentworld-test-crash")


def load_settings() -> dict[str, str]:
    raise RuntimeError("settings file /etc/agentworld-test/settings.toml is missing")


if __name__ == "__main__":
    load_settings()
    server.run("stdio")
