"""Clean up after a process that died without closing its sandboxes (kill -9, OOM, power loss).

Every container and tmux server a terminal sandbox starts carries its owner, `<host>:<pid>` (a
tmux server in its socket name, which is also on its command line). A new collector run calls
`reap_orphans()` first: whatever belongs to a process of this host that no longer exists is
removed, the process boxes and bwrap limit cgroups (`sandboxes.containment`, below this process's
own cgroups) of dead collectors included. A tmux server is found by its command line as well as by
its socket, since a server whose socket file is gone can no longer be asked to exit. Live owners
(another collector running now) are left alone. `reap_own()` removes what the calling process
itself still owns: the last step of a collector whose workers did not stop in time.

Every docker and tmux command here and in the backends runs in its own session, so a Ctrl-C sent
to the collector's process group cannot cut one short and leave a half-made container behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable

from sandboxes import containment
from sandboxes.checks import process_exists

OWNER_LABEL = "agentworld.owner"
_TMUX_PREFIX = "agentworld-"


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def tmux_socket_name() -> str:
    return f"{_TMUX_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _dead(pid: int) -> bool:
    return not process_exists(pid)


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
    return [name for name in names if (pid := containment.owner_of(name, _TMUX_PREFIX)) and select(pid)]


def _owned_tmux_processes(select: Callable[[int], bool]) -> dict[str, list[int]]:
    """Our tmux processes (servers, clients) by socket name: a server's command line is that of the
    client that forked it, `tmux -L <socket> ...`."""
    found: dict[str, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) != "tmux" or "-L" not in argv[:-1]:
            continue
        name = argv[argv.index("-L") + 1]
        if (pid := containment.owner_of(name, _TMUX_PREFIX)) and select(pid):
            found.setdefault(name, []).append(int(entry))
    return found


def _kill_tmux(name: str, pids: list[int]) -> None:
    """Ask the server to exit (its panes get SIGHUP), then kill what is left of it by pid."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        run_quietly(["tmux", "-L", name, "kill-server"], timeout=5.0)
    deadline = time.monotonic() + 2.0
    while (left := [pid for pid in pids if process_exists(pid)]) and time.monotonic() < deadline:
        time.sleep(0.01)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    remove_tmux_socket(name)


def _remove(select: Callable[[int], bool]) -> dict[str, int]:
    containers = _owned_containers(select)
    if containers:
        run_quietly(["docker", "rm", "-f", "-v", *containers])
    servers: dict[str, list[int]] = {name: [] for name in _owned_tmux_sockets(select)}
    servers.update(_owned_tmux_processes(select))
    for name, pids in servers.items():
        _kill_tmux(name, pids)
    boxes = containment.reap_boxes(select)
    return {"containers": len(containers), "tmux_servers": len(servers), "process_boxes": boxes}


def reap_orphans() -> dict[str, int]:
    """Remove containers, tmux servers and process boxes whose owning process is gone; returns
    what was removed."""
    return _remove(_dead)


def reap_own() -> dict[str, int]:
    """Remove the containers, tmux servers and process boxes this process started and still holds."""
    me = os.getpid()
    return _remove(lambda pid: pid == me)
