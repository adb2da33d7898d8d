"""Where an MCP server process runs: inside bwrap (default) or on the host (`local`, when asked).

The bwrap sandbox is the terminal sandbox's: its own root filesystem (`sandboxes.jail`: the
system directories and an allow-listed /etc read-only, private /tmp and /run, an empty
environment), the server's private workdir and state directory at fixed paths
(`/home/agent/workdir`, `/home/agent/state`, so recorded paths repeat across runs), no network
unless the entry asks, its own pid and IPC namespaces, an unprivileged user, and cgroup (or
rlimit) bounds from the terminal's `BwrapBackend` settings. The server's package, the Python it
links to and the command's own files (`binds.py`) are bound read-only at their own paths: nothing
else of the host (its homes, checkouts, data) exists inside.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sandboxes.base import SandboxError
from sandboxes.containment import ProcessBox
from sandboxes.jail import AGENT_UID, BWRAP_HOST_UID, SANDBOX_PATH, STARTER, Jail
from sandboxes.terminal.backends import bwrap_limits, make_cgroups, remove_cgroup
from sandboxes.terminal.config import BwrapBackend, LocalBackend

WORKDIR_IN_SANDBOX = "/home/agent/workdir"
STATE_IN_SANDBOX = "/home/agent/state"
HOME_IN_SANDBOX = "/home/agent"


class ServerJail:
    """The private directories of one server process and the argv that runs it isolated."""

    def __init__(self, backend: BwrapBackend | LocalBackend, tmpdir: Path) -> None:
        self.backend = backend
        self.tmpdir = tmpdir
        self.workdir = tmpdir / "workdir"
        self.state = tmpdir / "state"
        self.home = tmpdir / "home"
        self.pidfile = tmpdir / "server.pid"
        for path in (self.workdir, self.state, self.home):
            path.mkdir()
        self.limits = "none"
        self.cgroups: list[str] = []
        # On the host the server and all it starts stay in a box: nothing it leaves outlives it.
        self.box = ProcessBox() if isinstance(backend, LocalBackend) else None
        if isinstance(backend, BwrapBackend):
            if shutil.which("bwrap") is None:
                raise SandboxError(
                    "bwrap not found (apt-get install bubblewrap), or choose the local backend"
                )
            self.limits = bwrap_limits(backend)
            if self.limits == "cgroup":
                try:
                    self.cgroups = make_cgroups("mcp", backend)
                except OSError as exc:
                    raise SandboxError(f"bwrap sandbox: cannot set its cgroup limits: {exc}") from exc

    @property
    def isolated(self) -> bool:
        return isinstance(self.backend, BwrapBackend)

    def placeholders(self) -> dict[str, str]:
        """What `{workdir}` and `{state}` mean to the server: its own view of the directories."""
        if self.isolated:
            return {"workdir": WORKDIR_IN_SANDBOX, "state": STATE_IN_SANDBOX}
        return {"workdir": str(self.workdir), "state": str(self.state)}

    def hand_over(self) -> None:
        """Give the private directories to the unprivileged user the server runs as (when root)."""
        if self.isolated and os.geteuid() == 0:
            for top in (self.workdir, self.state, self.home):
                for root, dirs, files in os.walk(top):
                    for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                        os.lchown(name, BWRAP_HOST_UID, BWRAP_HOST_UID)

    def server_argv(
        self, program: list[str], env: dict[str, str], cwd: str, network: bool, binds: list[Path]
    ) -> tuple[list[str], dict[str, str], str | None]:
        """(argv, environment, host cwd) that run `program` in this jail, pid written to `pidfile`."""
        if not self.isolated:
            host_env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", SANDBOX_PATH), **env}
            assert self.box is not None
            argv = self.box.wrap(["sh", "-c", STARTER, "sh", str(self.pidfile), "0", *program])
            return argv, host_env, cwd or str(self.workdir)
        # The binds (the server's package, its Python) are staged as root: they may be under
        # root's 0700 home, which the unprivileged user bwrap runs as cannot reach.
        jail = Jail(str(self.tmpdir), "sandbox", [str(b) for b in binds], network)
        own = ["--bind", str(self.home), HOME_IN_SANDBOX]
        own += ["--bind", str(self.workdir), WORKDIR_IN_SANDBOX, "--bind", str(self.state), STATE_IN_SANDBOX]
        argv = ["bwrap", *jail.mounts(*own), "--unshare-all", "--die-with-parent", "--hostname", "sandbox"]
        if network:
            argv += ["--share-net"]
        argv += ["--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--chdir", cwd or WORKDIR_IN_SANDBOX]
        argv += ["--clearenv", "--setenv", "HOME", HOME_IN_SANDBOX, "--setenv", "PATH", SANDBOX_PATH]
        argv += ["--setenv", "LANG", "C.UTF-8"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        if self.limits == "rlimit":
            # Memory is left to cgroups: Node reserves gigabytes of address space, so RLIMIT_AS breaks it.
            argv += [
                "prlimit",
                f"--nproc={self.backend.pids_limit}",
                f"--cpu={self.backend.cpu_seconds}",
                "--",
            ]
        return jail.launch([*argv, *program], self.cgroups, str(self.pidfile)), {}, None

    def server_pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def resources(self) -> list[str]:
        held = self.box.resources() if self.box else []
        return [f"path:{self.tmpdir}", *(f"path:{c}" for c in self.cgroups), *held]

    def destroy(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None
        for cgroup in self.cgroups:
            remove_cgroup(cgroup)
        self.cgroups = []
        shutil.rmtree(self.tmpdir, ignore_errors=True)
