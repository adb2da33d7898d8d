"""Clean up after a process that died without closing its sandboxes (kill -9, OOM, power loss).

Every container and tmux server a terminal sandbox starts carries its owner, `<host>:<pid>`. A new
collector run calls `reap_orphans()` first: whatever belongs to a process of this host that no
longer exists is removed. Live owners (another collector running now) are left alone.
`reap_own()` removes what the calling process itself still owns: the last step of a collector
whose workers did not stop in time.

Every docker and tmux command here and in the backends runs in its own session, so a Ctrl-C sent
to the collector's process group cannot cut one short and leave a half-made container behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable

OWNER_LABEL = "agentworld.owner"
_TMUX_PREFIX = "agentworld-"


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def tmux_socket_name() -> str:
    return f"{_TMUX_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def run_quietly(argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a helper command (docker, tmux) outside our process group, output captured."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, start_new_session=True)


def _owned_containers(select: Callable[[int], bool]) -> list[str]:
    """Terminal containers of this host whose owner pid passes `select`."""
    if shutil.which("docker") is None:
        return []
    listed = run_quietly(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            "label=agentworld.sandbox=terminal",
            "--format",
            f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}',
        ]
    )
    host = socket.gethostname()
    found = []
    for line in listed.stdout.splitlines():
        container, _, label = line.partition(" ")
        label_host, _, pid = label.rpartition(":")
        if label_host == host and pid.isdigit() and select(int(pid)):
            found.append(container)
    return found


def _tmux_dir() -> str:
    return os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}")


def tmux_socket_path(name: str) -> str:
    return os.path.join(_tmux_dir(), name)


def remove_tmux_socket(name: str) -> None:
    """A tmux server that is killed (rather than exiting by itself) leaves its socket file behind."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmux_socket_path(name))


def _owned_tmux_sockets(select: Callable[[int], bool]) -> list[str]:
    directory = _tmux_dir()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        pid = name[len(_TMUX_PREFIX) :].split("-", 1)[0]
        if name.startswith(_TMUX_PREFIX) and pid.isdigit() and select(int(pid)):
            found.append(name)
    return found


def _remove(select: Callable[[int], bool]) -> dict[str, int]:
    containers = _owned_containers(select)
    if containers:
        run_quietly(["docker", "rm", "-f", "-v", *containers])
    sockets = _owned_tmux_sockets(select)
    for name in sockets:
        run_quietly(["tmux", "-L", name, "kill-server"])
        remove_tmux_socket(name)
    return {"containers": len(containers), "tmux_servers": len(sockets)}


def reap_orphans() -> dict[str, int]:
    """Remove containers and tmux servers whose owning process is gone; returns what was removed."""
    return _remove(_dead)


def reap_own() -> dict[str, int]:
    """Remove the containers and tmux servers this process started and still holds."""
    me = os.getpid()
    return _remove(lambda pid: pid == me)
