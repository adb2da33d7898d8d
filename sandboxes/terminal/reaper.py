"""Clean up after a process that died without closing its sandboxes (kill -9, OOM, power loss).

Every container and tmux server a terminal sandbox starts carries its owner, `<host>:<pid>`. A new
collector run calls `reap_orphans()` first: whatever belongs to a process of this host that no
longer exists is removed. Live owners (another collector running now) are left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import uuid

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


def _orphan_containers() -> list[str]:
    if shutil.which("docker") is None:
        return []
    listed = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            "label=agentworld.sandbox=terminal",
            "--format",
            f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}',
        ],
        capture_output=True,
        text=True,
    )
    host = socket.gethostname()
    orphans = []
    for line in listed.stdout.splitlines():
        container, _, label = line.partition(" ")
        label_host, _, pid = label.rpartition(":")
        if label_host == host and pid.isdigit() and _dead(int(pid)):
            orphans.append(container)
    return orphans


def _tmux_dir() -> str:
    return os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}")


def tmux_socket_path(name: str) -> str:
    return os.path.join(_tmux_dir(), name)


def remove_tmux_socket(name: str) -> None:
    """A tmux server that is killed (rather than exiting by itself) leaves its socket file behind."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmux_socket_path(name))


def _orphan_tmux_sockets() -> list[str]:
    directory = _tmux_dir()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    orphans = []
    for name in names:
        pid = name[len(_TMUX_PREFIX) :].split("-", 1)[0]
        if name.startswith(_TMUX_PREFIX) and pid.isdigit() and _dead(int(pid)):
            orphans.append(name)
    return orphans


def reap_orphans() -> dict[str, int]:
    """Remove containers and tmux servers whose owning process is gone; returns what was removed."""
    containers = _orphan_containers()
    if containers:
        subprocess.run(["docker", "rm", "-f", *containers], capture_output=True)
    sockets = _orphan_tmux_sockets()
    for name in sockets:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)
        remove_tmux_socket(name)
    return {"containers": len(containers), "tmux_servers": len(sockets)}
