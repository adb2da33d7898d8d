"""An http catalogue server the sandbox starts itself: its process, its port, its output."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from urllib.parse import urlsplit

from sandboxes.base import SandboxError
from sandboxes.mcp.server_output import ServerOutput

HTTP_POLL_S = 0.05


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_http_server(
    argv: list[str], env: dict[str, str], cwd: str | None, output: ServerOutput
) -> subprocess.Popen[bytes]:
    """The server's process, heading its own process group, its stdout and stderr into `output`."""
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            argv, env=env or None, cwd=cwd, stdin=subprocess.DEVNULL, stdout=write_end, stderr=write_end,
            start_new_session=True,
        )  # fmt: skip
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    output.read_pipe(read_end)
    return process


def wait_for_port(url: str, timeout_s: float, process: subprocess.Popen[bytes]) -> None:
    """Return once something listens on `url`'s port; SandboxError if the process exits first or
    nothing listens within `timeout_s`."""
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SandboxError(f"the MCP http server exited before listening on {url}")
        try:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=1.0):
                return
        except OSError:
            time.sleep(HTTP_POLL_S)
    raise SandboxError(f"the MCP http server did not listen on {url} within {timeout_s:.0f} s")
