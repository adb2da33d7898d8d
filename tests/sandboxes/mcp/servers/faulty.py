"""A stdio MCP server (the mcp SDK's MCPServer) that misbehaves on request, for the sandbox's fault
tests: `python faulty.py`. It prints a banner on stdout before it serves (while serving, the SDK
diverts stray prints to stderr), writes to stderr, floods stderr, and dies in the middle of a call
with an exit code or a signal. With `--ignore-term` it ignores SIGTERM, as a server stuck in
cleanup would."""

from __future__ import annotations

import os
import signal
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentworld-test-faulty")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    print(f"echo called with {len(text)} characters", file=sys.stderr, flush=True)
    return text


@server.tool()
def flood(megabytes: int) -> str:
    """Write `megabytes` MiB of log lines to stderr, then answer."""
    line = "x" * 1023 + "\n"
    for _ in range(megabytes * 1024):
        sys.stderr.write(line)
    sys.stderr.write("flood finished\n")
    sys.stderr.flush()
    return "flooded"


@server.tool()
def die(code: int) -> str:
    """Exit with `code` in the middle of the call, after a last line on stderr."""
    print(f"fatal: giving up with code {code}", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool()
def die_by_signal() -> str:
    """Be killed by SIGKILL in the middle of the call."""
    print("about to be killed", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


if __name__ == "__main__":
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("faulty server starting (a stray banner on stdout)", flush=True)
    print("faulty server: stderr banner", file=sys.stderr, flush=True)
    server.run("stdio")
