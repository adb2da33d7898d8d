"""The MCP collector: `python -m collectors.mcp`, its explorer policy and its embedded tasks."""
