"""A stdio MCP server that leaves processes behind, for the orphan tests:
`python spawning_mcp_server.py PIDS`. It ignores SIGTERM, and so does what it starts at once: a
plain child, a child in a session of its own and a double-forked one. Each of them, and the
server, appends its pid to PIDS. Its one tool, `wait`, sleeps (a call in flight when the
collector is killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentworld-test-spawning")


@server.tool()
def wait(seconds: float) -> str:
    """Sleep for `seconds`."""
    time.sleep(seconds)
    return "waited"


if __name__ == "__main__":
    pids = sys.argv[1]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # an ignored signal stays ignored across exec
    keep = f"echo $$ >> {pids}; exec sleep 300"
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.Popen(["sh", "-c", keep], **quiet)
    subprocess.Popen(["sh", "-c", f"setsid sh -c '{keep}' & (sh -c '{keep}' &)"], **quiet)
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\n")
    server.run("stdio")
